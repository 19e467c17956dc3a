package server

import (
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"sealbox/blobs"
	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/server/blobhttp"
)

func (s *Server) registerShareRoutes() {
	s.handle(http.MethodPost, "/v1/shares", s.bearer(s.handleShareCreate))
	s.handle(http.MethodDelete, "/v1/shares/:opaque_id", s.bearer(s.handleShareRevoke))
	s.handle(http.MethodGet, "/s/:opaque_id", s.shareRead(s.sharePageOr(s.handleShareMetadata)))
	s.handle(http.MethodGet, "/s/:opaque_id/blob/:hash", s.shareRead(s.handleShareBlob))
	s.handle(http.MethodHead, "/s/:opaque_id/blob/:hash", s.shareRead(s.handleShareBlob))
	s.handle(http.MethodGet, "/s/:opaque_id/wrapped-secret", s.shareRead(s.handleShareSecret))
}

// Limits of a link registration (server/PROTOCOL.md §7).
const (
	maxShareServes = 10_000
	maxShareSecret = 16 << 10
)

type issueShareRequest struct {
	OpaqueID      *string   `json:"opaque_id"`
	MetadataHash  *string   `json:"metadata_hash"`
	Serves        *[]string `json:"serves"`
	WrappedSecret *string   `json:"wrapped_secret"`
	ExpiresAt     *string   `json:"expires_at"`
}

// validate checks the registration against server/PROTOCOL.md §7 and
// returns the link to store, serves without duplicates. Ownership of the
// served blobs is the store's check.
func (req *issueShareRequest) validate(now time.Time) (*kv.Share, error) {
	if err := required("opaque_id", req.OpaqueID); err != nil {
		return nil, err
	}
	if !isOpaqueID(*req.OpaqueID) {
		return nil, invalid("opaque_id", "opaque_id must be 32 lowercase hex characters")
	}
	if err := required("metadata_hash", req.MetadataHash); err != nil {
		return nil, err
	}
	if !blobs.ValidHash(*req.MetadataHash) {
		return nil, invalid("metadata_hash", "metadata_hash must be 64 lowercase hex characters")
	}
	if err := required("serves", req.Serves); err != nil {
		return nil, err
	}
	sh := &kv.Share{MetadataHash: *req.MetadataHash}
	seen := make(map[string]bool, len(*req.Serves))
	for _, h := range *req.Serves {
		if !blobs.ValidHash(h) {
			return nil, invalid("serves", "every hash in serves must be 64 lowercase hex characters")
		}
		if !seen[h] {
			seen[h] = true
			sh.Serves = append(sh.Serves, h)
		}
	}
	if n := len(sh.Serves); n < 1 || n > maxShareServes {
		return nil, invalid("serves", "serves must name 1 to 10,000 distinct hashes")
	}
	if !seen[sh.MetadataHash] {
		return nil, invalid("metadata_hash", "metadata_hash must be one of serves")
	}
	if req.WrappedSecret != nil {
		secret, err := decodeBase64Field(*req.WrappedSecret)
		if err != nil || len(secret) < 1 || len(secret) > maxShareSecret {
			return nil, invalid("wrapped_secret", "wrapped_secret must be standard base64 of 1 byte to 16 KiB")
		}
		sh.WrappedSecret = secret
	}
	if req.ExpiresAt != nil {
		at, err := time.Parse(time.RFC3339, *req.ExpiresAt)
		if err != nil || !at.After(now) {
			return nil, invalid("expires_at", "expires_at must be an RFC 3339 time in the future")
		}
		sh.ExpiresAt = at
	}
	return sh, nil
}

// shareLimits are the configured per-account caps on links.
func (s *Server) shareLimits() kv.ShareLimits {
	return kv.ShareLimits{Links: s.cfg.MaxShareLinks, Serves: s.cfg.MaxShareServes}
}

type issueShareResponse struct {
	OpaqueID string `json:"opaque_id"`
}

// handles "POST /v1/shares": registers a link to blobs the caller holds. A
// retry of the same registration answers 201 again.
func (s *Server) handleShareCreate(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	sess := caller(r)
	var req issueShareRequest
	if err := s.decodeJSON(w, r, &req); err != nil {
		return err
	}
	sh, err := req.validate(s.now())
	if err != nil {
		return err
	}
	sh.AccountID = sess.AccountID
	if err := s.store.CreateShare(*req.OpaqueID, sh, s.shareLimits()); err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, issueShareResponse{OpaqueID: *req.OpaqueID})
}

// handles "DELETE /v1/shares/:opaque_id": 204 whether or not the caller had
// such a link, so the answer reveals nothing about other accounts' links.
func (s *Server) handleShareRevoke(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	sess := caller(r)
	id, err := pathParam(ps, "opaque_id", isOpaqueID)
	if err != nil {
		return err
	}
	if err := s.store.RevokeShare(sess.AccountID, id); err != nil {
		return err
	}
	return noContent(w)
}

// shareRead wraps the public share reads. Each client address spends a
// token of its bucket before anything is parsed or read, so malformed and
// unknown ids are limited too. (Referrer-Policy is set for every /s/ answer
// by the middleware.)
func (s *Server) shareRead(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		if ok, retryAfter := s.shareLimiter.Allow(s.rateKey(r)); !ok {
			return fault.LimitErrorf(fault.ECodeRateLimited, "share-rate", retryAfter, "too many share reads from this address")
		}
		return h(w, r, ps)
	}
}

type shareMetadataResponse struct {
	MetadataHash        string `json:"metadata_hash"`
	PassphraseProtected bool   `json:"passphrase_protected"`
}

// pathLink is the live link the path's opaque_id names.
func (s *Server) pathLink(ps httprouter.Params) (*kv.Share, error) {
	id, err := pathParam(ps, "opaque_id", isOpaqueID)
	if err != nil {
		return nil, err
	}
	return s.store.Share(id)
}

// handles "GET /s/:opaque_id"
func (s *Server) handleShareMetadata(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	sh, err := s.pathLink(ps)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, shareMetadataResponse{MetadataHash: sh.MetadataHash, PassphraseProtected: sh.WrappedSecret != nil})
}

// handles "GET /s/:opaque_id/blob/:hash" and its HEAD (the headers alone,
// so a page learns a blob's size before its ranged reads; a HEAD spends a
// share-read token like a GET): one blob the link names, with ranges and
// conditionals per server/PROTOCOL.md §7. The store's read transaction has
// ended before the file is opened and streamed.
func (s *Server) handleShareBlob(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id, err := pathParam(ps, "opaque_id", isOpaqueID)
	if err != nil {
		return err
	}
	hash, err := pathParam(ps, "hash", blobs.ValidHash)
	if err != nil {
		return err
	}
	rec, f, err := s.content.OpenShared(id, hash)
	if err != nil {
		return err
	}
	defer f.Close()
	blobhttp.Serve(w, r, f, rec.Size, hash, rec.StoredAt)
	return nil
}

// handles "GET /s/:opaque_id/wrapped-secret": the decoded bytes exactly as
// registered. A link without a passphrase answers the same 404 as an unknown
// link.
func (s *Server) handleShareSecret(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	sh, err := s.pathLink(ps)
	if err != nil {
		return err
	}
	if sh.WrappedSecret == nil {
		return kv.ErrShareNotFound
	}
	return writeBytes(w, mediaOctet, sh.WrappedSecret)
}
