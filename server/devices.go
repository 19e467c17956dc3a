package server

import (
	"encoding/base64"
	"net/http"
	"strconv"

	"github.com/julienschmidt/httprouter"

	"sealbox/kv/fault"
)

func (s *Server) registerDeviceRoutes() {
	s.handle(http.MethodGet, "/v1/auth/devices", s.bearer(s.handleDevicesList))
	s.handleOverlapping(http.MethodDelete, "/v1/auth/devices/:session_id", s.bearer(s.handleDeviceDelete))
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
	// NextCursor is absent on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// Pages of the session ledger.
const (
	devicesDefaultLimit = 100
	devicesMaxLimit     = 500
	// cursorLen is a ledger position decoded: 8 bytes of creation time and
	// a session id (a UUID).
	cursorLen = 8 + 36
)

// devicesQuery parses limit (default 100, 1 to 500) and cursor (a page's
// next_cursor, nil when absent): anything else is a malformed query
// parameter (400), a limit out of range included.
func devicesQuery(r *http.Request) (after []byte, limit int, err error) {
	q := r.URL.Query()
	limit = devicesDefaultLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > devicesMaxLimit {
			return nil, 0, fault.FieldErrorf(fault.ECodeMalformed, "limit", "limit must be an integer from 1 to %d", devicesMaxLimit)
		}
		limit = n
	}
	if v, ok := q["cursor"]; ok {
		after, err = base64.RawURLEncoding.Strict().DecodeString(v[0])
		// The decoder skips carriage returns and newlines: the text
		// itself must be the cursor's exact encoding.
		if err != nil || len(after) != cursorLen || len(v[0]) != base64.RawURLEncoding.EncodedLen(cursorLen) || !isCanonicalUUID(string(after[8:])) {
			return nil, 0, fault.FieldErrorf(fault.ECodeMalformed, "cursor", "cursor must be a next_cursor this endpoint gave")
		}
	}
	return after, limit, nil
}

// handles "GET /v1/auth/devices": one page of the caller's live sessions,
// oldest first (ties by session_id), and on the first page every cohort the
// account has been seen under; next_cursor, when present, asks for the next
// page.
func (s *Server) handleDevicesList(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	sess := caller(r)
	after, limit, err := devicesQuery(r)
	if err != nil {
		return err
	}
	ledger, next, err := s.store.LedgerPage(sess.AccountID, after, limit)
	if err != nil {
		return err
	}
	resp := devicesResponse{
		Sessions: make([]sessionView, 0, len(ledger.Sessions)),
		Cohorts:  make([]cohortView, 0, len(ledger.Cohorts)),
	}
	if next != nil {
		resp.NextCursor = base64.RawURLEncoding.EncodeToString(next)
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
