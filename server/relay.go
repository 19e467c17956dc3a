package server

import (
	"encoding/base64"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/server/secrets"
)

func (s *Server) registerRelayRoutes() {
	s.handle(http.MethodPost, "/v1/auth/devices/enroll", s.bearer(s.fresh(s.handleEnrollIssue)))
	s.handle(http.MethodPost, "/v1/auth/devices/enroll/redeem", s.handleEnrollRedeem)
	s.handle(http.MethodPost, "/v1/auth/enroll/channel", s.bearer(s.handleEnrollChannel))
	s.handle(http.MethodPost, "/v1/auth/devices/enroll/channel/:channel_id", s.handleRelayPost)
	s.handle(http.MethodGet, "/v1/auth/devices/enroll/channel/:channel_id", s.handleRelayDrain)
	s.handleOverlapping(http.MethodDelete, "/v1/auth/devices/enroll/channel/:channel_id", s.bearer(s.handleRelayClose))
}

// Figures of server/PROTOCOL.md §6.
const (
	enrollCodeTTL   = 10 * time.Minute
	channelTTL      = 15 * time.Minute
	maxRelayPayload = 64 << 10
	mailboxCapacity = 64

	redeemWindow = 10 * time.Minute
	// More refused redemptions than these within redeemWindow answer 429:
	// per client address, and across all addresses for fallback-shaped
	// codes, whose 10^12 space is small enough to be worth spraying.
	redeemRefusalsPerAddr  = 10
	redeemFallbackRefusals = 100
)

// isFallbackShaped reports whether a presented code is spelled as a numeric
// fallback: exactly secrets.FallbackDigits ASCII digits.
func isFallbackShaped(code string) bool { return isDigits(code, secrets.FallbackDigits) }

type enrollmentCodeResponse struct {
	Code         string `json:"code"`
	TextFallback string `json:"text_fallback"`
	ExpiresAt    string `json:"expires_at"`
}

// handles "POST /v1/auth/devices/enroll": a session alone is not enough; its
// credential must have been presented recently (fresh).
func (s *Server) handleEnrollIssue(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	sess := caller(r)
	code := s.newToken(prefixEnrollCode)
	fallback, lookup := s.secrets.NewFallback()
	expiresAt := kv.Deadline(s.now(), enrollCodeTTL)
	if err := s.store.IssueEnrollmentCode(sess.AccountID, code, lookup, expiresAt); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, enrollmentCodeResponse{Code: code, TextFallback: fallback, ExpiresAt: formatTime(expiresAt)})
}

type redeemRequest struct {
	Code *string `json:"code"`
}

func (req *redeemRequest) validate() error {
	// A code of any shape is looked up and, when it is not a live code,
	// refused with 404 like an unknown one (server/PROTOCOL.md §6): the contract gives
	// codes no shape rule to answer 422 with.
	return required("code", req.Code)
}

type channelResponse struct {
	ChannelID string `json:"channel_id"`
	ExpiresAt string `json:"expires_at"`
}

// handles "POST /v1/auth/devices/enroll/redeem": gated by the code alone.
func (s *Server) handleEnrollRedeem(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	var req redeemRequest
	if err := s.decodeAnonJSON(w, r, &req, maxAuthBody); err != nil {
		return err
	}
	if err := req.validate(); err != nil {
		return err
	}
	spelling, fallback := *req.Code, isFallbackShaped(*req.Code)
	if fallback {
		spelling = s.secrets.FallbackLookup(spelling)
	}
	refund, err := s.redeem.Admit(s.rateKey(r), fallback)
	if err != nil {
		return err
	}
	expiresAt := kv.Deadline(s.now(), channelTTL)
	channelID, err := s.store.RedeemEnrollmentCode(spelling, fallback, s.channelFor, expiresAt, s.relayLimits())
	if fault.ErrorCode(err) != fault.ECodeEnrollmentCodeRefused {
		refund()
	}
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, channelResponse{ChannelID: channelID, ExpiresAt: formatTime(expiresAt)})
}

// channelFor is the handle of the channel the code whose full spelling
// hashes to codeKey opens (server/PROTOCOL.md §17).
func (s *Server) channelFor(codeKey []byte) string {
	return prefixChannel + base64.RawURLEncoding.EncodeToString(s.secrets.EnrollmentChannel(codeKey))
}

// handles "POST /v1/auth/enroll/channel": the issuing account finds the
// channel its code opened (server/PROTOCOL.md §17). A code not yet
// redeemed, one whose channel expired or closed, and any code but the
// caller's own answer 404 alike. The code travels in the body, as at
// redeem, so no URL (and no proxy's access log) holds it.
func (s *Server) handleEnrollChannel(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	var req redeemRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	if err := req.validate(); err != nil {
		return err
	}
	channelID := s.channelFor(kv.HashToken(*req.Code))
	expiresAt, err := s.store.EnrollmentChannel(caller(r).AccountID, channelID)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, channelResponse{ChannelID: channelID, ExpiresAt: formatTime(expiresAt)})
}

// relayLimits are the relay's bounds: the contract's mailbox capacity and
// the configured per-account caps.
func (s *Server) relayLimits() kv.RelayLimits {
	return kv.RelayLimits{MailboxCapacity: mailboxCapacity, Channels: s.cfg.RelayChannels, Bytes: s.cfg.RelayBytes}
}

// parseDirection maps a direction's wire name to its mailbox.
func parseDirection(s string) (kv.Direction, bool) {
	switch s {
	case "to_initiator":
		return kv.ToInitiator, true
	case "to_enrollee":
		return kv.ToEnrollee, true
	}
	return 0, false
}

// direction is the JSON form of a mailbox name; a value outside the enum is
// 400, as server/PROTOCOL.md §1 decides for enums.
type direction kv.Direction

func (d *direction) UnmarshalJSON(b []byte) error {
	s, err := decodeEnum(b, "direction", "to_initiator", "to_enrollee")
	if err != nil {
		return err
	}
	dir, _ := parseDirection(s)
	*d = direction(dir)
	return nil
}

type relayRequest struct {
	Direction *direction `json:"direction"`
	Payload   *string    `json:"payload"`
}

func (req *relayRequest) validate() error {
	if err := required("direction", req.Direction); err != nil {
		return err
	}
	if err := required("payload", req.Payload); err != nil {
		return err
	}
	if n := len(*req.Payload); n < 1 || n > maxRelayPayload {
		return invalid("payload", "payload must be 1 byte to 64 KiB")
	}
	return nil
}

// handles "POST /v1/auth/devices/enroll/channel/:channel_id": gated by the
// handle alone. A handle that is not a live channel is 404; one no channel
// can ever have is 400, as for every server-minted token in a path.
func (s *Server) handleRelayPost(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	channelID, err := pathParam(ps, "channel_id", isChannelID)
	if err != nil {
		return err
	}
	var req relayRequest
	if err := s.decodeAnonJSON(w, r, &req, maxRelayBody); err != nil {
		return err
	}
	if err := req.validate(); err != nil {
		return err
	}
	if err := s.store.AppendRelay(channelID, kv.Direction(*req.Direction), []byte(*req.Payload), s.relayLimits()); err != nil {
		return err
	}
	return noContent(w)
}

type drainResponse struct {
	Payloads []string `json:"payloads"`
}

// handles "GET /v1/auth/devices/enroll/channel/:channel_id": destructive; the
// named mailbox is emptied and the other left alone.
func (s *Server) handleRelayDrain(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	channelID, err := pathParam(ps, "channel_id", isChannelID)
	if err != nil {
		return err
	}
	dir, ok := parseDirection(r.URL.Query().Get("direction"))
	if !ok {
		return fault.FieldErrorf(fault.ECodeMalformed, "direction", "the query parameter direction must be to_initiator or to_enrollee")
	}
	got, err := s.store.DrainRelay(channelID, dir)
	if err != nil {
		return err
	}
	resp := drainResponse{Payloads: make([]string, len(got))}
	for i, p := range got {
		resp.Payloads[i] = string(p)
	}
	return writeJSON(w, http.StatusOK, resp)
}

// handles "DELETE /v1/auth/devices/enroll/channel/:channel_id": only the
// account that issued the code; for any other the channel does not exist.
func (s *Server) handleRelayClose(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	channelID, err := pathParam(ps, "channel_id", isChannelID)
	if err != nil {
		return err
	}
	if err := s.store.CloseChannel(caller(r).AccountID, channelID); err != nil {
		return err
	}
	return noContent(w)
}
