package server

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"sealbox/kv/fault"
)

func (s *Server) registerEscrowRoutes() {
	s.handle(http.MethodGet, "/v1/auth/escrow", s.bearer(s.handleEscrowGet))
	s.handle(http.MethodPut, "/v1/auth/escrow", s.bearer(s.handleEscrowPut))
}

// maxEscrow is the escrow size limit (server/PROTOCOL.md §1 and §5).
const maxEscrow = 64 << 10

// handles "GET /v1/auth/escrow": the stored bytes, exactly.
func (s *Server) handleEscrowGet(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	e, err := s.store.Escrow(caller(r).AccountID)
	if err != nil {
		return err
	}
	return writeBytes(w, mediaOctet, e.Bytes)
}

type storeEscrowResponse struct {
	StoredAt string `json:"stored_at"`
	Replaced bool   `json:"replaced"`
}

// handles "PUT /v1/auth/escrow": replaces any earlier escrow in the same
// transaction.
func (s *Server) handleEscrowPut(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	sess := caller(r)
	body, err := s.readBody(w, r, mediaOctet, maxEscrow)
	if err != nil {
		return err
	}
	if len(body) == 0 {
		return fault.Errorf(fault.ECodeMalformed, "the escrow must be 1 byte to 64 KiB")
	}
	storedAt, replaced, err := s.store.PutEscrow(sess.AccountID, body)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, storeEscrowResponse{StoredAt: formatTime(storedAt), Replaced: replaced})
}
