package server

import (
	"math"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"sealbox/kv"
	"sealbox/kv/fault"
)

func (s *Server) registerUpgradeRoutes() {
	s.handle(http.MethodGet, "/v1/albums/:album_id/upgrade", s.bearer(s.handleUpgradePhase))
	s.handle(http.MethodPost, "/v1/albums/:album_id/upgrade", s.bearer(s.handleUpgradeStart))
	s.handle(http.MethodDelete, "/v1/albums/:album_id/upgrade", s.bearer(s.handleUpgradeAbort))
	s.handle(http.MethodPost, "/v1/albums/:album_id/upgrade/commit", s.bearer(s.handleUpgradeCommit))
}

// maxUpgradeBody limits the intent and the tombstone, CBOR documents like a
// device directory (server/PROTOCOL.md §1).
const maxUpgradeBody = 256 << 10

// upgradeLimits check the intent and the tombstone. Both are stored
// verbatim and the server reads nothing of a tombstone and only two keys of
// an intent, so any well-formed CBOR must pass (server/PROTOCOL.md §9): the
// limits are the decoder's largest, leaving refused only what it cannot
// represent (nesting beyond 65,535 levels). The 256 KiB body limit is what
// bounds the work: the check is one iterative pass (wellFormed), at most
// one level or one element per byte.
var upgradeLimits = cborLimits{MaxNestedLevels: 65535, MaxArrayElements: math.MaxInt32, MaxMapPairs: math.MaxInt32}

// upgradeCBOR decodes the intent's two text values, once checked.
var upgradeCBOR = upgradeLimits.decMode()

// decodeUpgradeIntent reads and checks a start body: a CBOR map (see
// topLevelMap: duplicate keys are refused, so no two readers of one intent
// can disagree about its intent_id or target) whose text keys intent_id and
// to_protocol_version, matched exactly, hold text strings, a UUID and a date.
// Other keys, of any type, are allowed and kept, since the whole body is
// stored verbatim. Anything else is malformed (400). It returns the intent id
// in canonical lowercase.
func decodeUpgradeIntent(body []byte) (id, to string, err error) {
	in, ok := topLevelMap(upgradeLimits, body)
	if !ok {
		return "", "", fault.Errorf(fault.ECodeMalformed, "the body must be one CBOR map")
	}
	rawID, ok := intentText(in, "intent_id")
	if !ok {
		return "", "", fault.FieldErrorf(fault.ECodeMalformed, "intent_id", "intent_id is required, a UUID as CBOR text")
	}
	to, ok = intentText(in, "to_protocol_version")
	if !ok {
		return "", "", fault.FieldErrorf(fault.ECodeMalformed, "to_protocol_version", "to_protocol_version is required, a date YYYY-MM-DD as CBOR text")
	}
	if id, ok = parseUUID(rawID); !ok {
		return "", "", fault.FieldErrorf(fault.ECodeMalformed, "intent_id", "intent_id must be a UUID")
	}
	if !isProtocolDate(to) {
		return "", "", fault.FieldErrorf(fault.ECodeMalformed, "to_protocol_version", "to_protocol_version must be a date YYYY-MM-DD")
	}
	return id, to, nil
}

// intentText returns the value of the text key name when it is an untagged
// text string (major type 3).
func intentText(in map[string][]byte, name string) (string, bool) {
	raw := in[name]
	if len(raw) == 0 || raw[0]>>5 != 3 {
		return "", false
	}
	var s string
	if err := upgradeCBOR.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// ceremonyParams reads what abort and commit name: the album in the path
// and the ceremony in the intent_id query parameter.
func ceremonyParams(r *http.Request, ps httprouter.Params) (albumID, intentID string, err error) {
	if albumID, err = pathParam(ps, "album_id", isCanonicalUUID); err != nil {
		return "", "", err
	}
	intentID, ok := parseUUID(r.URL.Query().Get("intent_id"))
	if !ok {
		return "", "", fault.FieldErrorf(fault.ECodeMalformed, "intent_id", "the query parameter intent_id must be a UUID")
	}
	return albumID, intentID, nil
}

type upgradePhaseResponse struct {
	AlbumID           string `json:"album_id"`
	IntentID          string `json:"intent_id,omitempty"`
	ToProtocolVersion string `json:"to_protocol_version,omitempty"`
	ExpiresAt         string `json:"expires_at,omitempty"`
	InFlight          int    `json:"in_flight"`
}

func writePhase(w http.ResponseWriter, p *kv.Phase) error {
	resp := upgradePhaseResponse{AlbumID: p.AlbumID, InFlight: p.InFlight}
	if u := p.Upgrade; u != nil {
		resp.IntentID, resp.ToProtocolVersion, resp.ExpiresAt = u.IntentID, u.ToProtocolVersion, formatTime(u.ExpiresAt)
	}
	return writeJSON(w, http.StatusOK, resp)
}

// handles "GET /v1/albums/:album_id/upgrade": the phase the proposer polls.
func (s *Server) handleUpgradePhase(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	sess := caller(r)
	albumID, err := pathParam(ps, "album_id", isCanonicalUUID)
	if err != nil {
		return err
	}
	p, err := s.store.UpgradePhase(sess.AccountID, albumID)
	if err != nil {
		return err
	}
	return writePhase(w, p)
}

// handles "POST /v1/albums/:album_id/upgrade": starts quiescence toward
// to_protocol_version, or answers the ceremony as it is when its intent_id
// is repeated.
func (s *Server) handleUpgradeStart(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	sess := caller(r)
	albumID, err := pathParam(ps, "album_id", isCanonicalUUID)
	if err != nil {
		return err
	}
	// Only the album's owner gets its body read and parsed.
	if err := s.store.CheckUpgradeAlbum(sess.AccountID, albumID); err != nil {
		return err
	}
	body, err := s.readBody(w, r, mediaCBOR, maxUpgradeBody)
	if err != nil {
		return err
	}
	id, to, err := decodeUpgradeIntent(body)
	if err != nil {
		return err
	}
	if !s.speaksProtocol(to) {
		return fault.FieldErrorf(fault.ECodeUpgradeBadTarget, "to_protocol_version",
			"to_protocol_version is outside %s..%s, the range the server speaks", s.cfg.ProtocolMin, s.cfg.ProtocolMax)
	}
	p, err := s.store.StartUpgrade(sess.AccountID, albumID, kv.Upgrade{IntentID: id, ToProtocolVersion: to, Intent: body}, s.cfg.UpgradeWindow)
	if err != nil {
		return err
	}
	return writePhase(w, p)
}

// handles "DELETE /v1/albums/:album_id/upgrade": aborts the ceremony named
// by the intent_id query parameter.
func (s *Server) handleUpgradeAbort(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	albumID, id, err := ceremonyParams(r, ps)
	if err != nil {
		return err
	}
	p, err := s.store.AbortUpgrade(caller(r).AccountID, albumID, id)
	if err != nil {
		return err
	}
	return writePhase(w, p)
}

// handles "POST /v1/albums/:album_id/upgrade/commit": with in_flight at
// zero, re-pins the album and keeps the tombstone (any well-formed CBOR,
// stored verbatim).
func (s *Server) handleUpgradeCommit(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	sess := caller(r)
	albumID, id, err := ceremonyParams(r, ps)
	if err != nil {
		return err
	}
	// Only the live ceremony's owner gets its body read and checked.
	if err := s.store.CheckCeremony(sess.AccountID, albumID, id); err != nil {
		return err
	}
	tombstone, err := s.readBody(w, r, mediaCBOR, maxUpgradeBody)
	if err != nil {
		return err
	}
	if !wellFormed(tombstone, upgradeLimits) {
		return fault.Errorf(fault.ECodeMalformed, "the tombstone must be one well-formed CBOR data item")
	}
	p, err := s.store.CommitUpgrade(sess.AccountID, albumID, id, tombstone)
	if err != nil {
		return err
	}
	return writePhase(w, p)
}
