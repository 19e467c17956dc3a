package server

import (
	"net/http"

	"github.com/julienschmidt/httprouter"
)

func (s *Server) registerVersionRoutes() {
	s.handle(http.MethodGet, "/v1/version", s.handleVersion)
}

type versionResponse struct {
	Service     string `json:"service"`
	Version     string `json:"version"`
	ProtocolMin string `json:"protocol_min"`
	ProtocolMax string `json:"protocol_max"`
}

// handles "GET /v1/version": the unauthenticated reachability probe.
func (s *Server) handleVersion(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	return writeJSON(w, http.StatusOK, versionResponse{
		Service: "sealbox", Version: Version,
		ProtocolMin: s.cfg.ProtocolMin, ProtocolMax: s.cfg.ProtocolMax,
	})
}
