package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/server"
	"sealbox/server/servertest"
)

func (ts *TestServer) refresh(tb testing.TB, refresh string) *Response {
	tb.Helper()
	return ts.Do(tb, Req{Method: "POST", Path: "/v1/auth/refresh", Body: map[string]any{"refresh_token": refresh}})
}

// TestSessionMaxAge: refreshing every 29 days keeps a session only until
// --session-max-age after its sign-in; the last refresh's tokens end then
// too (expires_by says so), and a refresh at or after it is 401
// error.auth.session_expired, as for an expired refresh token.
func TestSessionMaxAge(t *testing.T) {
	const day = 24 * time.Hour
	ts := MustOpenServer(t, func(c *server.Config) { c.SessionMaxAge = 60 * day })
	signIn := ts.Clock.Now()
	end := signIn.Add(60 * day)
	tok := ts.Register(t, "a@example.org")
	for _, at := range []time.Duration{29 * day, 58 * day} {
		ts.Clock.Advance(at - ts.Clock.Now().Sub(signIn))
		r := ts.refresh(t, tok.Refresh)
		tok = servertest.TokensOf(t, r)
		if got, want := r.JSON(t)["expires_by"], float64(ts.Clock.Now().Add(15*time.Minute).Unix()); got != want {
			t.Fatalf("expires_by at day %d: got %v, want %v", at/day, got, want)
		}
	}
	// Ten minutes before the end, the access token gets the ten minutes left.
	ts.Clock.Advance(end.Add(-10 * time.Minute).Sub(ts.Clock.Now()))
	r := ts.refresh(t, tok.Refresh)
	tok = servertest.TokensOf(t, r)
	if got, want := r.JSON(t)["expires_by"], float64(end.Unix()); got != want {
		t.Fatalf("expires_by just before the end: got %v, want %v (the chain's end)", got, want)
	}
	ts.Clock.Advance(10*time.Minute - time.Second)
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: tok.Access}).WantStatus(t, http.StatusOK)
	ts.Clock.Advance(time.Second)
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: tok.Access}).WantProblem(t, http.StatusUnauthorized, fault.ECodeUnauthenticated)
	ts.refresh(t, tok.Refresh).WantProblem(t, http.StatusUnauthorized, fault.ECodeSessionExpired)
	// A new sign-in begins a new chain.
	ts.Login(t, "a@example.org")
}

// TestSessionMaxAgeLowered: a chain already past a lowered
// --session-max-age is refused at its next refresh, though its refresh token
// has not expired.
func TestSessionMaxAgeLowered(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	ts.Clock.Advance(10 * 24 * time.Hour)
	ts.Config.SessionMaxAge = 7 * 24 * time.Hour
	ts.Restart(t)
	ts.refresh(t, tok.Refresh).WantProblem(t, http.StatusUnauthorized, fault.ECodeSessionExpired)
}

// TestRefreshTokensNameTheirChain: every refresh token of one sign-in names
// the same chain, another sign-in another one; and a token from before
// chains (found through the refresh token index) still refreshes after the
// upgrade, into a chain, while its reuse still revokes what it rotated into.
func TestRefreshTokensNameTheirChain(t *testing.T) {
	ts := MustOpenServer(t)
	first := ts.Register(t, "a@example.org")
	next := servertest.TokensOf(t, ts.refresh(t, first.Refresh))
	other := ts.Login(t, "a@example.org")
	c1, ok1 := kv.RefreshChain(first.Refresh)
	c2, ok2 := kv.RefreshChain(next.Refresh)
	c3, ok3 := kv.RefreshChain(other.Refresh)
	if !ok1 || !ok2 || !ok3 || c1 != c2 || c1 == c3 {
		t.Fatalf("chains: %x %x %x (%v %v %v); want the first two equal, the third another", c1, c2, c3, ok1, ok2, ok3)
	}

	// A session written by a sealbox before chains: its refresh token is
	// a bare 256-bit token.
	acct, err := ts.Store.AccountByEmail("a@example.org")
	if err != nil {
		t.Fatal(err)
	}
	now := ts.Clock.Now()
	legacy := "sbx_rt_" + strings.Repeat("A", 43)
	old := &kv.Session{ID: "0b5f2a9e-7c1d-4e8a-b3f6-9d2c4e6a8b11", AccountID: acct.ID, CreatedAt: now, AuthenticatedAt: now,
		AccessExpiresAt: now.Add(15 * time.Minute), RefreshExpiresAt: now.Add(30 * 24 * time.Hour)}
	if err := ts.Store.LoginSucceeded(acct.Email, old, "sbx_at_legacy", legacy); err != nil {
		t.Fatal(err)
	}
	upgraded := servertest.TokensOf(t, ts.refresh(t, legacy))
	if _, ok := kv.RefreshChain(upgraded.Refresh); !ok {
		t.Fatalf("a pre-chain token refreshed into %q, which names no chain", upgraded.Refresh)
	}
	ts.refresh(t, legacy).WantProblem(t, http.StatusUnauthorized, fault.ECodeSessionExpired)
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: upgraded.Access}).WantProblem(t, http.StatusUnauthorized, fault.ECodeUnauthenticated)
	// Other chains are untouched.
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: next.Access}).WantStatus(t, http.StatusOK)
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: other.Access}).WantStatus(t, http.StatusOK)
}

// TestRefreshReuseWithAForgedSecret: a token naming a live chain with a
// secret the chain never had is refused like reuse (the chain's id is only
// ever seen inside its own refresh tokens).
func TestRefreshReuseWithAForgedSecret(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	chain, _ := kv.RefreshChain(tok.Refresh)
	ts.refresh(t, kv.RefreshToken(chain, [32]byte{7})).WantProblem(t, http.StatusUnauthorized, fault.ECodeSessionExpired)
	ts.refresh(t, tok.Refresh).WantProblem(t, http.StatusUnauthorized, fault.ECodeSessionExpired)
}
