package server

import (
	"net/http"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"sealbox/blobs"
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

// readyCacheTTL is how long a readiness verdict is reused: a probe writes
// and deletes a blob (two requests on S3), which anyone who can reach the
// port must not be able to repeat at will.
const readyCacheTTL = 2 * time.Second

// readyVerdict is one readiness check's outcome, reused for readyCacheTTL.
type readyVerdict struct {
	at     time.Time
	checks map[string]string
	ready  bool
}

// handles "GET /readyz": the store answers, the blobs directory is writable
// and the disk is not full. 503 names the failing check. The verdict is
// checked at most once per readyCacheTTL, by one caller while the others
// wait for it. With witnesses, "witnesses" says "ok" or names the
// witnesses in conflict with the log (they saw another history of it): the
// log is then not cosigned, but accounts and photos are served as before,
// so the server stays ready; the metrics and the log say more.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	v := s.readiness()
	if !v.ready {
		return &fault.Error{Code: fault.ECodeNotReady, Message: "the server is not ready", Details: map[string]any{"checks": v.checks}}
	}
	return writeJSON(w, http.StatusOK, healthResponse{Status: "ready", Checks: v.checks})
}

// readiness returns the cached verdict while it is fresh, else checks.
func (s *Server) readiness() readyVerdict {
	s.readyMu.Lock()
	defer s.readyMu.Unlock()
	now := s.now()
	if v := s.readyLast; v.checks != nil && now.Sub(v.at) < readyCacheTTL && !now.Before(v.at) {
		return v
	}
	checks, ready := s.checkReadiness()
	s.readyLast = readyVerdict{at: now, checks: checks, ready: ready}
	return s.readyLast
}

// checkReadiness runs every readiness check; the answer names the failing
// check only, the log says why, for the operator.
func (s *Server) checkReadiness() (map[string]string, bool) {
	checks := map[string]string{"store": "ok", "blobs": "ok", "disk": "ok"}
	ready := true
	if err := s.store.Ping(); err != nil {
		checks["store"], ready = "unavailable", false
		s.log.Warn().Err(err).Str("check", "store").Msg("not ready")
	}
	if err := s.blobs.CheckWritable(); err != nil {
		checks["blobs"], ready = "unwritable", false
		s.log.Warn().Err(err).Str("check", "blobs").Msg("not ready")
	}
	if space, ok := s.blobs.(blobs.FreeSpacer); !ok {
		// A bucket has no free-space figure (S3): there is no disk to check.
		delete(checks, "disk")
	} else if free, err := space.FreeBytes(); err != nil {
		checks["disk"], ready = "unknown", false
	} else if free < minFreeDisk {
		checks["disk"], ready = "full", false
	}
	if len(s.cfg.Witnesses) > 0 {
		checks["witnesses"] = s.witnessCheck()
	}
	return checks, ready
}

// witnessCheck is "ok", or the configured witnesses that are not:
// "conflict: " and those that refuse the log's tree as another history than
// the one they saw, "fault: " and those whose last answer was wrong (a tree
// size beyond the log, a redirect), the two joined by "; ". It is the
// witnesses' state now: a witness leaves it when it next cosigns.
func (s *Server) witnessCheck() string {
	states, err := s.store.WitnessStates()
	if err != nil {
		s.log.Warn().Err(err).Str("check", "witnesses").Msg("read the witnesses' state")
		return "unknown"
	}
	var conflicts, faults []string
	for _, vkey := range s.cfg.Witnesses {
		switch st := states[vkey]; {
		case st.Conflict != "":
			conflicts = append(conflicts, witnessName(vkey))
		case st.Fault != "":
			faults = append(faults, witnessName(vkey))
		}
	}
	var parts []string
	if conflicts != nil {
		parts = append(parts, "conflict: "+strings.Join(conflicts, ", "))
	}
	if faults != nil {
		parts = append(parts, "fault: "+strings.Join(faults, ", "))
	}
	if parts == nil {
		return "ok"
	}
	return strings.Join(parts, "; ")
}

// witnessName is the name in a witness's verifier key, <name>+<hash>+<key>.
func witnessName(vkey string) string {
	name, _, _ := strings.Cut(vkey, "+")
	return name
}
