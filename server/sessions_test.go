package server_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/server"
	"sealbox/server/servertest"
)

func TestRegisterLoginProfileRefreshLogout(t *testing.T) {
	ts := MustOpenServer(t)
	reg := ts.Do(t, Req{Method: "POST", Path: "/v1/auth/register", Body: map[string]any{"email": "  Alice@Example.ORG ", "password": servertest.Password}}).WantStatus(t, 200)
	m := reg.JSON(t)
	if m["token_type"] != "Bearer" || !strings.HasPrefix(m["access_token"].(string), "sbx_at_") || !strings.HasPrefix(m["refresh_token"].(string), "sbx_rt_") {
		t.Fatalf("token response: %s", reg.Body)
	}
	if got, want := int64(m["expires_by"].(float64)), ts.Clock.Now().Add(15*time.Minute).Unix(); got != want {
		t.Fatalf("expires_by: got %d, want %d (absolute Unix seconds)", got, want)
	}
	if cc := reg.Header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("Cache-Control: got %q", cc)
	}
	tok := ts.Login(t, "alice@example.org")
	prof := ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: tok.Access}).WantStatus(t, 200).JSON(t)
	if prof["email"] != "alice@example.org" || prof["created_at"] != "2026-11-22T10:00:00Z" {
		t.Fatalf("profile: %v", prof)
	}
	if _, ok := prof["display_name"]; ok {
		t.Fatalf("display_name present while unset: %v", prof)
	}
	next := servertest.TokensOf(t, ts.Do(t, Req{Method: "POST", Path: "/v1/auth/refresh", Body: map[string]any{"refresh_token": tok.Refresh}}))
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: tok.Access}).WantProblem(t, 401, "error.auth.unauthenticated")
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: next.Access}).WantStatus(t, 200)
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/logout", Token: next.Access}).WantStatus(t, 204)
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: next.Access}).WantProblem(t, 401, "error.auth.unauthenticated")
	// Logout is idempotent for any presented token.
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/logout", Token: next.Access}).WantStatus(t, 204)
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/logout", Token: "sbx_at_never-issued"}).WantStatus(t, 204)
	r := ts.Do(t, Req{Method: "POST", Path: "/v1/auth/logout"})
	r.WantProblem(t, 401, "error.auth.unauthenticated")
	if got := r.Header.Get("WWW-Authenticate"); got != `Bearer realm="sealbox"` {
		t.Fatalf("WWW-Authenticate without a token: got %q", got)
	}
}

// TestAccessTokenNamesTheCaller: an access token names its account (the
// profile then reads the session and the account together, server/PROTOCOL.md
// §0), and a token minted before tokens named accounts, still live after an
// upgrade, serves the same profile.
func TestAccessTokenNamesTheCaller(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "alice@example.org")
	prof := ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: tok.Access}).WantStatus(t, 200).JSON(t)
	if named, ok := kv.AccessTokenAccount(tok.Access); !ok || named != prof["user_id"] {
		t.Fatalf("access token %q names %q (%v); want the caller %v", tok.Access, named, ok, prof["user_id"])
	}
	now := ts.Clock.Now()
	older := "sbx_at_" + strings.Repeat("A", 42) + "E" // 32 bytes, as every access token was before
	sess := &kv.Session{ID: "0b5f2a9e-7c1d-4e8a-b3f6-000000000001", AccountID: prof["user_id"].(string), CreatedAt: now,
		AuthenticatedAt: now, AccessExpiresAt: now.Add(time.Minute), RefreshExpiresAt: now.Add(time.Hour)}
	if err := ts.Store.LoginSucceeded("alice@example.org", sess, older, "sbx_rt_older"); err != nil {
		t.Fatal(err)
	}
	again := ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: older}).WantStatus(t, 200).JSON(t)
	if again["user_id"] != prof["user_id"] || again["email"] != "alice@example.org" {
		t.Fatalf("profile by a token of the older shape: %v, want %v", again, prof)
	}
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/logout", Token: older}).WantStatus(t, 204)
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: older}).WantProblem(t, 401, "error.auth.unauthenticated")
}

func TestWWWAuthenticateInvalidToken(t *testing.T) {
	ts := MustOpenServer(t)
	r := ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: "sbx_at_bogus"})
	r.WantProblem(t, 401, "error.auth.unauthenticated")
	if got, want := r.Header.Get("WWW-Authenticate"), `Bearer realm="sealbox", error="invalid_token"`; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestAccessTokenExpires(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	ts.Clock.Advance(15*time.Minute - time.Second)
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: tok.Access}).WantStatus(t, 200)
	ts.Clock.Advance(time.Second)
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: tok.Access}).WantProblem(t, 401, "error.auth.unauthenticated")
	servertest.TokensOf(t, ts.Do(t, Req{Method: "POST", Path: "/v1/auth/refresh", Body: map[string]any{"refresh_token": tok.Refresh}}))
}

// TestAccessTokenExpiresAtTheSecondShown: expires_by is whole Unix seconds,
// and a token issued at a fractional second stops being honoured exactly at
// the instant shown, not up to a second later.
func TestAccessTokenExpiresAtTheSecondShown(t *testing.T) {
	ts := MustOpenServer(t)
	ts.Clock.Advance(700 * time.Millisecond)
	r := ts.Do(t, Req{Method: "POST", Path: "/v1/auth/register", Body: map[string]any{"email": "a@example.org", "password": servertest.Password}})
	tok := servertest.TokensOf(t, r)
	shown := time.Unix(int64(r.JSON(t)["expires_by"].(float64)), 0)
	ts.Clock.Advance(shown.Sub(ts.Clock.Now()) - time.Nanosecond)
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: tok.Access}).WantStatus(t, 200)
	ts.Clock.Advance(time.Nanosecond)
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: tok.Access}).WantProblem(t, 401, "error.auth.unauthenticated")
}

func TestRefreshExpiresAndReuseRevokesLineage(t *testing.T) {
	ts := MustOpenServer(t)
	first := ts.Register(t, "a@example.org")
	other := ts.Login(t, "a@example.org")
	second := servertest.TokensOf(t, ts.Do(t, Req{Method: "POST", Path: "/v1/auth/refresh", Body: map[string]any{"refresh_token": first.Refresh}}))
	third := servertest.TokensOf(t, ts.Do(t, Req{Method: "POST", Path: "/v1/auth/refresh", Body: map[string]any{"refresh_token": second.Refresh}}))
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/refresh", Body: map[string]any{"refresh_token": first.Refresh}}).
		WantProblem(t, 401, "error.auth.session_expired")
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: third.Access}).WantProblem(t, 401, "error.auth.unauthenticated")
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/refresh", Body: map[string]any{"refresh_token": third.Refresh}}).
		WantProblem(t, 401, "error.auth.session_expired")
	// Another lineage of the same account is untouched.
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: other.Access}).WantStatus(t, 200)
	ts.Clock.Advance(30 * 24 * time.Hour)
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/refresh", Body: map[string]any{"refresh_token": other.Refresh}}).
		WantProblem(t, 401, "error.auth.session_expired")
}

func TestRefreshCarriesAuthenticatedAt(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	ts.Clock.Advance(time.Hour)
	next := servertest.TokensOf(t, ts.Do(t, Req{Method: "POST", Path: "/v1/auth/refresh", Body: map[string]any{"refresh_token": tok.Refresh}}))
	sess, err := ts.Store.Authenticate(next.Access)
	if err != nil {
		t.Fatal(err)
	}
	if !sess.AuthenticatedAt.Equal(ts.Clock.Now().Add(-time.Hour)) || !sess.CreatedAt.Equal(ts.Clock.Now()) {
		t.Fatalf("authenticated_at %v created_at %v", sess.AuthenticatedAt, sess.CreatedAt)
	}
}

func TestRegistrationRules(t *testing.T) {
	ts := MustOpenServer(t)
	ts.Register(t, "taken@example.org")
	long := strings.Repeat("x", 1025)
	cases := []servertest.Scenario{
		{Name: "not JSON", Body: "{", WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "empty body", Body: "", ContentType: "application/json", WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "array", Body: `[]`, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "null", Body: `null`, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "trailing data", Body: `{"email":"a@b.c","password":"12345678"} {}`, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "unknown key", Body: map[string]any{"email": "a@b.c", "password": "12345678", "admin": true}, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "wrong type", Body: map[string]any{"email": 5, "password": "12345678"}, WantStatus: 400, WantCode: "error.request.malformed"},
		// encoding/json alone would accept these three.
		{Name: "key in another case", Body: `{"EMAIL":"a@b.c","password":"12345678"}`, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "key twice", Body: `{"email":"a@b.c","email":"d@e.f","password":"12345678"}`, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "invalid UTF-8", Body: "{\"email\":\"a@b.c\",\"password\":\"\xff2345678\"}", WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "missing email", Body: map[string]any{"password": "12345678"}, WantStatus: 422, WantCode: "error.request.invalid"},
		{Name: "null password", Body: map[string]any{"email": "a@b.c", "password": nil}, WantStatus: 422, WantCode: "error.request.invalid"},
		{Name: "email without @", Body: map[string]any{"email": "abc", "password": "12345678"}, WantStatus: 422, WantCode: "error.request.invalid"},
		{Name: "email two @", Body: map[string]any{"email": "a@b@c", "password": "12345678"}, WantStatus: 422, WantCode: "error.request.invalid"},
		{Name: "email empty domain", Body: map[string]any{"email": "ab@", "password": "12345678"}, WantStatus: 422, WantCode: "error.request.invalid"},
		{Name: "email too long", Body: map[string]any{"email": strings.Repeat("a", 250) + "@b.cd", "password": "12345678"}, WantStatus: 422, WantCode: "error.request.invalid"},
		{Name: "short password", Body: map[string]any{"email": "a@b.c", "password": "1234567"}, WantStatus: 422, WantCode: "error.request.invalid"},
		{Name: "long password", Body: map[string]any{"email": "a@b.c", "password": long}, WantStatus: 422, WantCode: "error.request.invalid"},
		{Name: "taken", Body: map[string]any{"email": "TAKEN@example.org", "password": "12345678"}, WantStatus: 409, WantCode: "error.account.exists"},
		{Name: "wrong content type", Body: `{"email":"a@b.c","password":"12345678"}`, ContentType: "text/plain", WantStatus: 415, WantCode: "error.request.unsupported_media_type"},
		{Name: "no content type", Body: `{"email":"a@b.c","password":"12345678"}`, Header: map[string]string{"Content-Type": ""}, WantStatus: 415, WantCode: "error.request.unsupported_media_type"},
	}
	for _, sc := range cases {
		sc.Method, sc.Path = "POST", "/v1/auth/register"
		t.Run(sc.Name, func(t *testing.T) { sc.Test(t, ts.Client) })
	}
	// Parameters such as charset are allowed.
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/register", ContentType: "application/json; charset=utf-8",
		Body: `{"email":"c@example.org","password":"12345678"}`}).WantStatus(t, 200)
}

func TestRegistrationClosed(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.Registration = "closed" })
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/register", Body: map[string]any{"email": "a@b.c", "password": "12345678"}}).
		WantProblem(t, 403, "error.registration.closed")
}

// TestBodyLimit: register's body is at most 16 KiB (a route anyone may
// call), whatever MaxBody.
func TestBodyLimit(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.MaxBody = 1 << 20 })
	big := `{"email":"a@b.c","password":"` + strings.Repeat("x", 16<<10) + `"}`
	r := ts.Do(t, Req{Method: "POST", Path: "/v1/auth/register", Body: big})
	if r.Status != 413 || len(r.Body) != 0 {
		t.Fatalf("got %d with %d body bytes, want 413 with none", r.Status, len(r.Body))
	}
	// Chunked: no Content-Length, the limit still holds.
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte(big))
		pw.Close()
	}()
	req, _ := http.NewRequest("POST", ts.URL()+"/v1/auth/register", pr)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 413 || resp.ContentLength != 0 || req.ContentLength != 0 {
		t.Fatalf("chunked: got %d (Content-Length %d)", resp.StatusCode, resp.ContentLength)
	}
}

func TestLoginFailuresAndLockout(t *testing.T) {
	ts := MustOpenServer(t)
	ts.Register(t, "a@example.org")
	wrong := map[string]any{"email": "a@example.org", "password": "wrong password"}
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/login", Body: map[string]any{"email": "a@example.org", "password": ""}}).
		WantProblem(t, 401, "error.auth.invalid_credentials")
	for i := 0; i < 9; i++ {
		ts.Do(t, Req{Method: "POST", Path: "/v1/auth/login", Body: wrong}).WantProblem(t, 401, "error.auth.invalid_credentials")
	}
	r := ts.Do(t, Req{Method: "POST", Path: "/v1/auth/login", Body: map[string]any{"email": "a@example.org", "password": servertest.Password}})
	r.WantProblem(t, 423, "error.auth.account_locked")
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("423 without Retry-After")
	}
	ts.Clock.Advance(15 * time.Minute)
	ts.Login(t, "a@example.org")
	// After a success the count starts again from zero.
	for i := 0; i < 9; i++ {
		ts.Do(t, Req{Method: "POST", Path: "/v1/auth/login", Body: wrong}).WantProblem(t, 401, "error.auth.invalid_credentials")
	}
	ts.Login(t, "a@example.org")
}

func TestLockoutDoesNotRevealAccounts(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.LockoutFailures = 3 })
	body := map[string]any{"email": "ghost@example.org", "password": "whatever1"}
	for i := 0; i < 3; i++ {
		ts.Do(t, Req{Method: "POST", Path: "/v1/auth/login", Body: body}).WantProblem(t, 401, "error.auth.invalid_credentials")
	}
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/login", Body: body}).WantProblem(t, 423, "error.auth.account_locked")
}

func TestLoginValidation(t *testing.T) {
	ts := MustOpenServer(t)
	ts.Register(t, "a@example.org")
	cases := []servertest.Scenario{
		{Name: "malformed", Body: "{]", WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "unknown key", Body: map[string]any{"email": "a@example.org", "password": "x", "otp": "1"}, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "missing password", Body: map[string]any{"email": "a@example.org"}, WantStatus: 422, WantCode: "error.request.invalid"},
		{Name: "bad email", Body: map[string]any{"email": "nope", "password": "x"}, WantStatus: 422, WantCode: "error.request.invalid"},
		{Name: "password too long", Body: map[string]any{"email": "a@example.org", "password": strings.Repeat("p", 1025)}, WantStatus: 422, WantCode: "error.request.invalid"},
		{Name: "wrong password", Body: map[string]any{"email": "a@example.org", "password": "not it"}, WantStatus: 401, WantCode: "error.auth.invalid_credentials"},
		{Name: "unknown account", Body: map[string]any{"email": "b@example.org", "password": servertest.Password}, WantStatus: 401, WantCode: "error.auth.invalid_credentials"},
	}
	for _, sc := range cases {
		sc.Method, sc.Path = "POST", "/v1/auth/login"
		t.Run(sc.Name, func(t *testing.T) { sc.Test(t, ts.Client) })
	}
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/login", ContentType: "text/plain", Body: `{"email":"a@example.org","password":"x"}`}).
		WantProblem(t, 415, "error.request.unsupported_media_type")
}

func TestLoginDropsUnusableAdvisoryFields(t *testing.T) {
	ts := MustOpenServer(t)
	ts.Register(t, "a@example.org")
	for _, extra := range []map[string]any{
		{"cohort_hash": "bad hash!", "device_id": "not-a-uuid"},
		{"cohort_hash": 42, "device_id": false},
		{"cohort_hash": strings.Repeat("a", 129), "device_id": nil},
	} {
		tok := ts.Login(t, "a@example.org", extra)
		sess, err := ts.Store.Authenticate(tok.Access)
		if err != nil {
			t.Fatal(err)
		}
		if sess.CohortHash != "" || sess.DeviceID != "" {
			t.Fatalf("unusable values kept: %+v", sess)
		}
	}
	tok := ts.Login(t, "a@example.org", map[string]any{"cohort_hash": "Ab_=+/-9", "device_id": "6F1C2B9E-3D4A-4E5F-8A7B-1C2D3E4F5A6B"})
	sess, _ := ts.Store.Authenticate(tok.Access)
	if sess.CohortHash != "Ab_=+/-9" || sess.DeviceID != "6f1c2b9e-3d4a-4e5f-8a7b-1c2d3e4f5a6b" {
		t.Fatalf("usable values: %+v", sess)
	}
}

func TestReauthenticate(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.LockoutFailures = 2 })
	tok := ts.Register(t, "a@example.org")
	ts.Clock.Advance(5 * time.Minute)
	r := ts.Do(t, Req{Method: "POST", Path: "/v1/auth/reauthenticate", Token: tok.Access, Body: map[string]any{"password": servertest.Password}}).WantStatus(t, 200)
	if got := r.JSON(t)["authenticated_at"]; got != "2026-11-22T10:05:00Z" {
		t.Fatalf("authenticated_at: got %v", got)
	}
	sess, _ := ts.Store.Authenticate(tok.Access)
	if !sess.AuthenticatedAt.Equal(ts.Clock.Now()) {
		t.Fatalf("session authenticated_at not updated: %v", sess.AuthenticatedAt)
	}
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/reauthenticate", Token: tok.Access, Body: map[string]any{}}).WantProblem(t, 422, "error.request.invalid")
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/reauthenticate", Token: tok.Access, Body: "x"}).WantProblem(t, 400, "error.request.malformed")
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/reauthenticate", Token: tok.Access, ContentType: "text/plain", Body: "x"}).WantProblem(t, 415, "error.request.unsupported_media_type")
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/reauthenticate", Body: map[string]any{"password": servertest.Password}}).WantProblem(t, 401, "error.auth.unauthenticated")
	for i := 0; i < 2; i++ {
		ts.Do(t, Req{Method: "POST", Path: "/v1/auth/reauthenticate", Token: tok.Access, Body: map[string]any{"password": "wrong!"}}).
			WantProblem(t, 401, "error.auth.invalid_credentials")
	}
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/reauthenticate", Token: tok.Access, Body: map[string]any{"password": servertest.Password}}).
		WantProblem(t, 423, "error.auth.account_locked")
	// The lock is per address: login is locked too.
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/login", Body: map[string]any{"email": "a@example.org", "password": servertest.Password}}).
		WantProblem(t, 423, "error.auth.account_locked")
}

func TestPasswordChange(t *testing.T) {
	ts := MustOpenServer(t)
	mine := ts.Register(t, "a@example.org")
	other := ts.Login(t, "a@example.org")
	stranger := ts.Register(t, "b@example.org")
	change := func(current, next string) *Response {
		return ts.Do(t, Req{Method: "POST", Path: "/v1/auth/password", Token: mine.Access,
			Body: map[string]any{"current_password": current, "new_password": next}})
	}
	change("wrong password", "new password 1").WantProblem(t, 401, "error.auth.invalid_credentials")
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: other.Access}).WantStatus(t, 200)
	change(servertest.Password, "short").WantProblem(t, 422, "error.request.invalid")
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/password", Token: mine.Access, Body: map[string]any{"current_password": servertest.Password}}).
		WantProblem(t, 422, "error.request.invalid")
	ts.Clock.Advance(time.Minute)
	change(servertest.Password, "new password 1").WantStatus(t, 204)
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: mine.Access}).WantStatus(t, 200)
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: other.Access}).WantProblem(t, 401, "error.auth.unauthenticated")
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/refresh", Body: map[string]any{"refresh_token": other.Refresh}}).
		WantProblem(t, 401, "error.auth.session_expired")
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: stranger.Access}).WantStatus(t, 200)
	sess, _ := ts.Store.Authenticate(mine.Access)
	if !sess.AuthenticatedAt.Equal(ts.Clock.Now()) {
		t.Fatalf("authenticated_at: got %v, want now", sess.AuthenticatedAt)
	}
	// The caller's refresh token still works, and only the new password signs in.
	servertest.TokensOf(t, ts.Do(t, Req{Method: "POST", Path: "/v1/auth/refresh", Body: map[string]any{"refresh_token": mine.Refresh}}))
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/login", Body: map[string]any{"email": "a@example.org", "password": servertest.Password}}).
		WantProblem(t, 401, "error.auth.invalid_credentials")
	servertest.TokensOf(t, ts.Do(t, Req{Method: "POST", Path: "/v1/auth/login", Body: map[string]any{"email": "a@example.org", "password": "new password 1"}}))
}

func TestProfilePatch(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	patch := func(body any) *Response {
		return ts.Do(t, Req{Method: "PATCH", Path: "/v1/auth/profile", Token: tok.Access, Body: body})
	}
	if got := patch(map[string]any{"display_name": "Alice"}).WantStatus(t, 200).JSON(t)["display_name"]; got != "Alice" {
		t.Fatalf("set: got %v", got)
	}
	if got := patch(map[string]any{}).WantStatus(t, 200).JSON(t)["display_name"]; got != "Alice" {
		t.Fatalf("absent key changed the name: %v", got)
	}
	r := ts.Do(t, Req{Method: "PATCH", Path: "/v1/auth/profile", Token: tok.Access, Body: []byte{}, ContentType: "application/json"}).WantStatus(t, 200)
	if got := r.JSON(t)["display_name"]; got != "Alice" {
		t.Fatalf("empty body changed the name: %v", got)
	}
	prof := patch(map[string]any{"display_name": nil}).WantStatus(t, 200).JSON(t)
	if _, ok := prof["display_name"]; ok {
		t.Fatalf("null did not clear: %v", prof)
	}
	patch(map[string]any{"display_name": 7}).WantProblem(t, 400, "error.request.malformed")
	patch(map[string]any{"email": "x@y.z"}).WantProblem(t, 400, "error.request.malformed")
	patch(map[string]any{"display_name": ""}).WantProblem(t, 422, "error.request.invalid")
	patch(map[string]any{"display_name": strings.Repeat("n", 257)}).WantProblem(t, 422, "error.request.invalid")
	ts.Do(t, Req{Method: "PATCH", Path: "/v1/auth/profile", Token: tok.Access, Body: "display_name=x", ContentType: "application/x-www-form-urlencoded"}).
		WantProblem(t, 415, "error.request.unsupported_media_type")
	ts.Do(t, Req{Method: "PATCH", Path: "/v1/auth/profile", Body: map[string]any{}}).WantProblem(t, 401, "error.auth.unauthenticated")
}

func TestVersionAndUnknownRoutes(t *testing.T) {
	ts := MustOpenServer(t)
	v := ts.Do(t, Req{Method: "GET", Path: "/v1/version"}).WantStatus(t, 200).JSON(t)
	if v["service"] != "sealbox" || v["version"] != server.Version || v["protocol_min"] != "2025-01-15" || v["protocol_max"] != "2026-09-01" {
		t.Fatalf("version: %v", v)
	}
	ts.Do(t, Req{Method: "GET", Path: "/v1/nope"}).WantProblem(t, 404, "error.not_found")
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/login"}).WantProblem(t, 405, "error.method_not_allowed")
	// The overlap DELETE /v1/auth/devices/... dispatcher answers unknown
	// shapes like the router does.
	tok := ts.Register(t, "routes@example.org")
	for _, p := range []string{"/v1/auth/devices/a/b", "/v1/auth/devices/enroll/channel", "/v1/auth/devices/enroll/channel/x/y"} {
		ts.Do(t, Req{Method: "DELETE", Path: p, Token: tok.Access}).WantProblem(t, 404, "error.not_found")
	}
	r := ts.Do(t, Req{Method: "GET", Path: "/v1/version"})
	for k, want := range map[string]string{"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"} {
		if got := r.Header.Get(k); got != want {
			t.Errorf("%s: got %q, want %q", k, got, want)
		}
	}
	if r.Header.Get("X-Request-Id") == "" {
		t.Error("no X-Request-Id")
	}
}

func TestConcurrentRegistrationOfOneAddress(t *testing.T) {
	ts := MustOpenServer(t)
	var wg sync.WaitGroup
	statuses := make(chan int, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses <- ts.Do(t, Req{Method: "POST", Path: "/v1/auth/register", Body: map[string]any{"email": "same@example.org", "password": servertest.Password}}).Status
		}()
	}
	wg.Wait()
	close(statuses)
	ok := 0
	for s := range statuses {
		if s == 200 {
			ok++
		} else if s != 409 {
			t.Fatalf("unexpected status %d", s)
		}
	}
	if ok != 1 {
		t.Fatalf("%d registrations succeeded, want 1", ok)
	}
}

// Parallel guesses cannot pass the lockout limit while their verifications
// run: of 40 concurrent wrong passwords exactly LockoutFailures are checked
// (401) and the rest find the address locked (423).
func TestParallelGuessesStopAtTheLimit(t *testing.T) {
	ts := MustOpenServer(t)
	ts.Register(t, "a@example.org")
	statuses := concurrentLogins(t, ts, 40, "a@example.org", "wrong password")
	if statuses[401] != 10 || statuses[423] != 30 {
		t.Fatalf("statuses: %v, want 10 x 401 and 30 x 423", statuses)
	}
}

// The bound holds across nodes: 40 concurrent wrong passwords sent to two
// nodes sharing the store get exactly LockoutFailures verifications
// between them, as to one node.
func TestParallelGuessesAcrossNodesStopAtTheLimit(t *testing.T) {
	ts := MustOpenServer(t)
	ts.Register(t, "a@example.org")
	nodes := []*TestServer{ts, ts.SecondNode(t)}
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			r := nodes[i%2].Do(t, Req{Method: "POST", Path: "/v1/auth/login", Body: map[string]any{"email": "a@example.org", "password": "wrong password"}})
			mu.Lock()
			statuses[r.Status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if statuses[401] != 10 || statuses[423] != 30 {
		t.Fatalf("statuses: %v, want 10 x 401 and 30 x 423", statuses)
	}
}

// Parallel correct sign-ins of one account all succeed: verifications in
// flight are not counted as failures.
func TestParallelCorrectLoginsAllSucceed(t *testing.T) {
	ts := MustOpenServer(t)
	ts.Register(t, "a@example.org")
	if statuses := concurrentLogins(t, ts, 40, "a@example.org", servertest.Password); statuses[200] != 40 {
		t.Fatalf("statuses: %v, want 40 x 200", statuses)
	}
}

func concurrentLogins(t *testing.T, ts *TestServer, n int, email, password string) map[int]int {
	t.Helper()
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := ts.Do(t, Req{Method: "POST", Path: "/v1/auth/login", Body: map[string]any{"email": email, "password": password}})
			mu.Lock()
			statuses[r.Status]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	return statuses
}

// TestRevocationOnEveryNode: a session revoked on one node is refused by
// every node from the moment the revocation is answered (server/PROTOCOL.md
// §2), whether by logout or by another device, although each node had
// just authenticated it; the other sessions go on.
func TestRevocationOnEveryNode(t *testing.T) {
	ts := MustOpenServer(t)
	nodes := []*TestServer{ts, ts.SecondNode(t)}
	ts.Register(t, "a@example.org")
	profile := func(tok string) Req { return Req{Method: "GET", Path: "/v1/auth/profile", Token: tok} }
	for i, revoke := range []func(victim, other servertest.Tokens, on *TestServer){
		func(victim, _ servertest.Tokens, on *TestServer) {
			on.Do(t, Req{Method: "POST", Path: "/v1/auth/logout", Token: victim.Access}).WantStatus(t, 204)
		},
		func(victim, other servertest.Tokens, on *TestServer) {
			on.Do(t, Req{Method: "DELETE", Path: "/v1/auth/devices/" + ts.SessionID(t, victim.Access), Token: other.Access}).WantStatus(t, 204)
		},
	} {
		victim, other := ts.Login(t, "a@example.org"), ts.Login(t, "a@example.org")
		for _, n := range nodes {
			n.Do(t, profile(victim.Access)).WantStatus(t, 200)
		}
		revoke(victim, other, nodes[i%2])
		for _, n := range nodes {
			n.Do(t, profile(victim.Access)).WantProblem(t, 401, "error.auth.unauthenticated")
			n.Do(t, profile(other.Access)).WantStatus(t, 200)
		}
	}
}
