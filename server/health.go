package server

import (
	"errors"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"sealbox/kv/fault"
)

func (s *Server) registerHealthRoutes() {
	s.handle(http.MethodGet, "/healthz", s.handleHealthz)
	s.handle(http.MethodGet, "/readyz", s.handleReadyz)
}

// minFreeDisk is the free space below which the server reports not ready:
// a write that cannot complete is worse than one that is not attempted.
const minFreeDisk = 256 << 20

type healthResponse struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks,omitempty"`
}

// handles "GET /healthz": the process is up and serving.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	return writeJSON(w, http.StatusOK, healthResponse{Status: "ok"})
}

// handles "GET /readyz": the store answers, the blobs directory is writable
// and the disk is not full. 503 names the failing check.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	checks := map[string]string{"store": "ok", "blobs": "ok", "disk": "ok"}
	ready := true
	// The answer names the failing check only; the log says why, for the
	// operator.
	if err := s.store.Ping(); err != nil {
		checks["store"], ready = "unavailable", false
		s.log.Warn().Err(err).Str("check", "store").Msg("not ready")
	}
	if err := s.blobs.CheckWritable(); err != nil {
		checks["blobs"], ready = "unwritable", false
		s.log.Warn().Err(err).Str("check", "blobs").Msg("not ready")
	}
	if free, err := s.blobs.FreeBytes(); errors.Is(err, errors.ErrUnsupported) {
		// A bucket has no free-space figure (S3): there is no disk to check.
		delete(checks, "disk")
	} else if err != nil {
		checks["disk"], ready = "unknown", false
	} else if free < minFreeDisk {
		checks["disk"], ready = "full", false
	}
	if !ready {
		return &fault.Error{Code: fault.ECodeNotReady, Message: "the server is not ready", Details: map[string]any{"checks": checks}}
	}
	return writeJSON(w, http.StatusOK, healthResponse{Status: "ready", Checks: checks})
}
