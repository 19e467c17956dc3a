package server

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"sealbox/blobs"
	"sealbox/server/blobhttp"
)

func (s *Server) registerHoldingRoutes() {
	s.handle(http.MethodGet, "/v1/blobs/:hash", s.bearer(s.handleHeldBlob))
	s.handle(http.MethodHead, "/v1/blobs/:hash", s.bearer(s.handleHeldBlob))
}

// handles "GET /v1/blobs/:hash" and its HEAD: the owner's read of a blob
// the account holds, with ranges and conditionals as on a share read
// (server/PROTOCOL.md §8). A hash nobody stored, another account's blob and
// one the caller does not hold answer the same 404. The store's read
// transaction has ended before the blob is opened and streamed.
func (s *Server) handleHeldBlob(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	sess := caller(r)
	hash, err := pathParam(ps, "hash", blobs.ValidHash)
	if err != nil {
		return err
	}
	rec, f, err := s.content.OpenHeld(sess.AccountID, hash)
	if err != nil {
		return err
	}
	defer f.Close()
	blobhttp.Serve(w, r, f, rec.Size, hash, rec.StoredAt)
	return nil
}
