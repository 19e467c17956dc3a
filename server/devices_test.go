package server_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"sealbox/kv/fault"
	"sealbox/server/servertest"
)

// Ledger fetches GET /v1/auth/devices.
func (ts *TestServer) Ledger(tb testing.TB, access string) (sessions, cohorts []map[string]any) {
	tb.Helper()
	m := ts.Do(tb, Req{Method: "GET", Path: "/v1/auth/devices", Token: access}).WantStatus(tb, http.StatusOK).JSON(tb)
	for _, x := range m["sessions"].([]any) {
		sessions = append(sessions, x.(map[string]any))
	}
	for _, x := range m["cohorts"].([]any) {
		cohorts = append(cohorts, x.(map[string]any))
	}
	return sessions, cohorts
}

// SessionID is the id of the session an access token belongs to.
func (ts *TestServer) SessionID(tb testing.TB, access string) string {
	tb.Helper()
	sessions, _ := ts.Ledger(tb, access)
	for _, s := range sessions {
		if s["current"] == true {
			return s["session_id"].(string)
		}
	}
	tb.Fatal("no session is marked current")
	return ""
}

func TestDevicesLedger(t *testing.T) {
	ts := MustOpenServer(t)
	t0 := ts.Clock.Now()
	// No User-Agent: the optional member is then absent.
	first := servertest.TokensOf(t, ts.Do(t, Req{Method: "POST", Path: "/v1/auth/register", Header: map[string]string{"User-Agent": ""},
		Body: map[string]any{"email": "alice@example.com", "password": servertest.Password}}))
	ts.Clock.Advance(time.Minute)
	zeta := ts.Login(t, "alice@example.com", map[string]any{"cohort_hash": "zeta"})
	ts.Clock.Advance(time.Minute)
	device := "3d1c1f7e-2a8b-4e53-9d07-6c6f1c2b9a10"
	alpha := ts.Login(t, "alice@example.com", map[string]any{"cohort_hash": "alpha", "device_id": device})
	ts.Clock.Advance(time.Minute)
	zetaAgain := ts.Login(t, "alice@example.com", map[string]any{"cohort_hash": "zeta"})
	ts.Clock.Advance(time.Minute)

	r := ts.Do(t, Req{Method: "GET", Path: "/v1/auth/devices", Token: alpha.Access}).WantStatus(t, http.StatusOK)
	if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("Cache-Control: got %q, want no-store", cc)
	}
	sessions, cohorts := ts.Ledger(t, alpha.Access)
	at := func(min int) string { return t0.Add(time.Duration(min) * time.Minute).Format(time.RFC3339) }
	want := []map[string]any{
		{"created_at": at(0), "current": false, "ip_address": "127.0.0.1"},
		{"created_at": at(1), "current": false, "ip_address": "127.0.0.1", "user_agent": "Go-http-client/1.1", "cohort_hash": "zeta"},
		{"created_at": at(2), "current": true, "ip_address": "127.0.0.1", "user_agent": "Go-http-client/1.1", "cohort_hash": "alpha", "device_id": device},
		{"created_at": at(3), "current": false, "ip_address": "127.0.0.1", "user_agent": "Go-http-client/1.1", "cohort_hash": "zeta"},
	}
	if len(sessions) != len(want) {
		t.Fatalf("sessions: got %d, want %d", len(sessions), len(want))
	}
	for i, w := range want {
		got := sessions[i]
		if id, _ := got["session_id"].(string); len(id) != 36 {
			t.Fatalf("session %d: session_id %v", i, got["session_id"])
		}
		w["session_id"] = got["session_id"]
		w["authenticated_at"] = w["created_at"]
		w["last_active_at"] = w["created_at"]
		if len(got) != len(w) {
			t.Fatalf("session %d: got members %v, want %v", i, got, w)
		}
		for k, v := range w {
			if got[k] != v {
				t.Fatalf("session %d: %s = %v, want %v", i, k, got[k], v)
			}
		}
	}
	// Cohorts by first sighting, not by hash.
	wantCohorts := []map[string]any{
		{"cohort_hash": "zeta", "first_seen": at(1), "last_seen": at(3)},
		{"cohort_hash": "alpha", "first_seen": at(2), "last_seen": at(2)},
	}
	assertCohorts(t, cohorts, wantCohorts)

	// Cohorts outlive the sessions that carried them.
	for _, tok := range []Tokens{zeta, zetaAgain} {
		ts.Do(t, Req{Method: "DELETE", Path: "/v1/auth/devices/" + ts.SessionID(t, tok.Access), Token: first.Access}).WantStatus(t, http.StatusNoContent)
	}
	sessions, cohorts = ts.Ledger(t, first.Access)
	if len(sessions) != 2 || sessions[0]["current"] != true || sessions[1]["cohort_hash"] != "alpha" {
		t.Fatalf("sessions after revoking the zeta ones: %v", sessions)
	}
	assertCohorts(t, cohorts, wantCohorts)

	// A refresh rotates the session but is not a sighting.
	ts.Clock.Advance(time.Minute)
	servertest.TokensOf(t, ts.Do(t, Req{Method: "POST", Path: "/v1/auth/refresh", Body: map[string]any{"refresh_token": alpha.Refresh}}))
	_, cohorts = ts.Ledger(t, first.Access)
	assertCohorts(t, cohorts, wantCohorts)
}

func assertCohorts(t *testing.T, got, want []map[string]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("cohorts: got %v, want %v", got, want)
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("cohort %d: got %v, want %v", i, got[i], want[i])
		}
		for k, v := range want[i] {
			if got[i][k] != v {
				t.Fatalf("cohort %d: %s = %v, want %v", i, k, got[i][k], v)
			}
		}
	}
}

func TestDevicesEmptyLists(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "alice@example.com")
	r := ts.Do(t, Req{Method: "GET", Path: "/v1/auth/devices", Token: tok.Access}).WantStatus(t, http.StatusOK)
	if !bytes.Contains(r.Body, []byte(`"cohorts":[]`)) {
		t.Fatalf("no cohorts must be an empty array, not null or absent: %s", r.Body)
	}
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/devices"}).WantProblem(t, http.StatusUnauthorized, fault.ECodeUnauthenticated)
}

// Unusable advisory identifiers are dropped, never refused: the sign-in
// succeeds and nothing of them is recorded.
func TestAdvisoryIdentifiersDropped(t *testing.T) {
	unusable := []struct {
		name   string
		cohort any
		device any
	}{
		{"empty strings", "", ""},
		{"nulls", nil, nil},
		{"numbers", 42, 7},
		{"objects", map[string]any{"a": 1}, []any{"x"}},
		{"booleans", true, false},
		{"cohort with a space, device not a UUID", "has space", "not-a-uuid"},
		{"cohort too long, device one character short", strings.Repeat("a", 129), "3d1c1f7e-2a8b-4e53-9d07-6c6f1c2b9a1"},
		{"cohort with a dot, device with braces", "a.b", "{3d1c1f7e-2a8b-4e53-9d07-6c6f1c2b9a10}"},
	}
	ts := MustOpenServer(t)
	ts.Register(t, "alice@example.com")
	_, secret := ts.RegisterWithTOTP(t, "bob@example.com")
	for _, u := range unusable {
		t.Run("login "+u.name, func(t *testing.T) {
			tok := ts.Login(t, "alice@example.com", map[string]any{"cohort_hash": u.cohort, "device_id": u.device})
			assertNoAdvisory(t, ts, tok)
		})
		t.Run("verify-totp "+u.name, func(t *testing.T) {
			ts.Clock.Advance(step)
			mfa := ts.LoginChallenge(t, "bob@example.com")
			tok := servertest.TokensOf(t, ts.VerifyTOTP(t, mfa, ts.Code(t, secret, 0), map[string]any{"cohort_hash": u.cohort, "device_id": u.device}))
			assertNoAdvisory(t, ts, tok)
		})
	}
	t.Run("longest usable cohort is kept", func(t *testing.T) {
		long := strings.Repeat("Az09_=+/-", 15)[:128]
		ts.Clock.Advance(time.Minute) // so the new session is listed last
		tok := ts.Login(t, "alice@example.com", map[string]any{"cohort_hash": long})
		sessions, _ := ts.Ledger(t, tok.Access)
		if got := sessions[len(sessions)-1]["cohort_hash"]; got != long {
			t.Fatalf("cohort_hash: got %v, want the 128-character value", got)
		}
	})
}

func assertNoAdvisory(t *testing.T, ts *TestServer, tok Tokens) {
	t.Helper()
	sessions, cohorts := ts.Ledger(t, tok.Access)
	for _, s := range sessions {
		if _, ok := s["cohort_hash"]; ok {
			t.Fatalf("a dropped cohort_hash was recorded: %v", s)
		}
		if _, ok := s["device_id"]; ok {
			t.Fatalf("a dropped device_id was recorded: %v", s)
		}
	}
	if len(cohorts) != 0 {
		t.Fatalf("a dropped cohort was sighted: %v", cohorts)
	}
}

func TestDeleteDevice(t *testing.T) {
	t.Run("another of the caller's sessions", func(t *testing.T) {
		ts := MustOpenServer(t)
		a := ts.Register(t, "alice@example.com")
		b := ts.Login(t, "alice@example.com")
		ts.Do(t, Req{Method: "DELETE", Path: "/v1/auth/devices/" + ts.SessionID(t, b.Access), Token: a.Access}).WantStatus(t, http.StatusNoContent)
		ts.Do(t, Req{Method: "GET", Path: "/v1/auth/devices", Token: b.Access}).WantProblem(t, http.StatusUnauthorized, fault.ECodeUnauthenticated)
		ts.Do(t, Req{Method: "POST", Path: "/v1/auth/refresh", Body: map[string]any{"refresh_token": b.Refresh}}).WantProblem(t, http.StatusUnauthorized, fault.ECodeSessionExpired)
		if sessions, _ := ts.Ledger(t, a.Access); len(sessions) != 1 {
			t.Fatalf("sessions left: got %d, want 1", len(sessions))
		}
	})
	t.Run("the current session, named in upper case", func(t *testing.T) {
		ts := MustOpenServer(t)
		a := ts.Register(t, "alice@example.com")
		id := strings.ToUpper(ts.SessionID(t, a.Access))
		ts.Do(t, Req{Method: "DELETE", Path: "/v1/auth/devices/" + id, Token: a.Access}).WantStatus(t, http.StatusNoContent)
		ts.Do(t, Req{Method: "GET", Path: "/v1/auth/devices", Token: a.Access}).WantProblem(t, http.StatusUnauthorized, fault.ECodeUnauthenticated)
	})
	t.Run("another account's session answers as an unknown one", func(t *testing.T) {
		ts := MustOpenServer(t)
		alice := ts.Register(t, "alice@example.com")
		bob := ts.Register(t, "bob@example.com")
		bobSession := ts.SessionID(t, bob.Access)
		aliceSession := ts.SessionID(t, alice.Access)
		foreign := ts.Do(t, Req{Method: "DELETE", Path: "/v1/auth/devices/" + bobSession, Token: alice.Access})
		foreign.WantProblem(t, http.StatusNotFound, fault.ECodeSessionNotFound)
		unknown := ts.Do(t, Req{Method: "DELETE", Path: "/v1/auth/devices/0b5f2a9e-7c1d-4e8a-b3f6-9d2c4e6a8b10", Token: alice.Access})
		unknown.WantProblem(t, http.StatusNotFound, fault.ECodeSessionNotFound)
		if !bytes.Equal(foreign.Body, unknown.Body) {
			t.Fatalf("bodies differ:\nforeign %s\nunknown %s", foreign.Body, unknown.Body)
		}
		ts.Do(t, Req{Method: "DELETE", Path: "/v1/auth/devices/" + aliceSession, Token: alice.Access}).WantStatus(t, http.StatusNoContent)
		gone := ts.Do(t, Req{Method: "DELETE", Path: "/v1/auth/devices/" + aliceSession, Token: bob.Access})
		if !bytes.Equal(gone.Body, unknown.Body) {
			t.Fatalf("a revoked session's body differs from an unknown one's: %s", gone.Body)
		}
		// Bob's session was untouched.
		ts.Ledger(t, bob.Access)
	})
	t.Run("malformed ids", func(t *testing.T) {
		ts := MustOpenServer(t)
		a := ts.Register(t, "alice@example.com")
		for _, id := range []string{"not-a-uuid", "123", "0b5f2a9e7c1d4e8ab3f69d2c4e6a8b10", "zb5f2a9e-7c1d-4e8a-b3f6-9d2c4e6a8b10", "0b5f2a9e-7c1d-4e8a-b3f6-9d2c4e6a8b10a"} {
			ts.Do(t, Req{Method: "DELETE", Path: "/v1/auth/devices/" + id, Token: a.Access}).WantProblem(t, http.StatusBadRequest, fault.ECodeMalformed)
		}
		ts.Do(t, Req{Method: "DELETE", Path: "/v1/auth/devices/not-a-uuid"}).WantProblem(t, http.StatusUnauthorized, fault.ECodeUnauthenticated)
	})
}

// Production clocks carry sub-second time: the ledger must stay exact when
// a session is rewritten (reauthenticate) or revoked at such a time.
func TestLedgerWithSubSecondClock(t *testing.T) {
	ts := MustOpenServer(t)
	ts.Clock.Advance(1500 * time.Millisecond)
	a := ts.Register(t, "alice@example.com")
	ts.Clock.Advance(1250 * time.Millisecond)
	b := ts.Login(t, "alice@example.com")
	ts.Clock.Advance(1250 * time.Millisecond)
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/reauthenticate", Token: a.Access, Body: map[string]any{"password": servertest.Password}}).WantStatus(t, http.StatusOK)
	if sessions, _ := ts.Ledger(t, a.Access); len(sessions) != 2 {
		t.Fatalf("sessions after reauthenticate: got %d, want 2: %v", len(sessions), sessions)
	}
	ts.Do(t, Req{Method: "DELETE", Path: "/v1/auth/devices/" + ts.SessionID(t, b.Access), Token: a.Access}).WantStatus(t, http.StatusNoContent)
	if sessions, _ := ts.Ledger(t, a.Access); len(sessions) != 1 {
		t.Fatalf("sessions after revoking one: got %d, want 1: %v", len(sessions), sessions)
	}
}
