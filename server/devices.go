package server

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"sealbox/kv/fault"
)

func (s *Server) registerDeviceRoutes() {
	s.handle(http.MethodGet, "/v1/auth/devices", s.bearer(s.handleDevicesList))
	s.handleShared(http.MethodDelete, "/v1/auth/devices/:session_id", s.bearer(s.handleDeviceDelete))
}

type sessionView struct {
	SessionID       string `json:"session_id"`
	CreatedAt       string `json:"created_at"`
	AuthenticatedAt string `json:"authenticated_at"`
	// LastActiveAt equals CreatedAt: activity is not tracked (a write per
	// request), and the interface says so to clients.
	LastActiveAt string `json:"last_active_at"`
	UserAgent    string `json:"user_agent,omitempty"`
	IPAddress    string `json:"ip_address,omitempty"`
	CohortHash   string `json:"cohort_hash,omitempty"`
	DeviceID     string `json:"device_id,omitempty"`
	Current      bool   `json:"current"`
}

type cohortView struct {
	CohortHash string `json:"cohort_hash"`
	FirstSeen  string `json:"first_seen"`
	LastSeen   string `json:"last_seen"`
}

type devicesResponse struct {
	Sessions []sessionView `json:"sessions"`
	Cohorts  []cohortView  `json:"cohorts"`
}

// handles "GET /v1/auth/devices": the caller's live sessions, oldest first,
// and every cohort the account has been seen under.
func (s *Server) handleDevicesList(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	sess := caller(r)
	ledger, err := s.store.Ledger(sess.AccountID)
	if err != nil {
		return err
	}
	resp := devicesResponse{
		Sessions: make([]sessionView, 0, len(ledger.Sessions)),
		Cohorts:  make([]cohortView, 0, len(ledger.Cohorts)),
	}
	for _, x := range ledger.Sessions {
		created := formatTime(x.CreatedAt)
		resp.Sessions = append(resp.Sessions, sessionView{
			SessionID: x.ID, CreatedAt: created, AuthenticatedAt: formatTime(x.AuthenticatedAt), LastActiveAt: created,
			UserAgent: x.UserAgent, IPAddress: x.IPAddress, CohortHash: x.CohortHash, DeviceID: x.DeviceID,
			Current: x.ID == sess.ID,
		})
	}
	for _, c := range ledger.Cohorts {
		resp.Cohorts = append(resp.Cohorts, cohortView{CohortHash: c.Hash, FirstSeen: formatTime(c.FirstSeen), LastSeen: formatTime(c.LastSeen)})
	}
	return writeJSON(w, http.StatusOK, resp)
}

// handles "DELETE /v1/auth/devices/{session_id}": any of the caller's
// sessions, the current one included. Another account's session answers
// exactly as an unknown one.
func (s *Server) handleDeviceDelete(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id, ok := parseUUID(ps.ByName("session_id"))
	if !ok {
		return fault.FieldErrorf(fault.ECodeMalformed, "session_id", "session_id must be a UUID")
	}
	if err := s.store.DeleteSession(caller(r).AccountID, id); err != nil {
		return err
	}
	return noContent(w)
}
