package server_test

import (
	"bytes"
	"encoding/base32"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"sealbox/kv/fault"
	"sealbox/server"
	"sealbox/server/servertest"
)

var testTOTPOpts = totp.ValidateOpts{Period: 30, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1}

const step = 30 * time.Second

// EnrollTOTP starts an enrollment and returns the secret carried by its
// provisioning URI, checking the URI's parameters on the way.
func (ts *TestServer) EnrollTOTP(tb testing.TB, access string) string {
	tb.Helper()
	r := ts.Do(tb, Req{Method: "POST", Path: "/v1/auth/totp/enroll", Token: access}).WantStatus(tb, http.StatusOK)
	if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
		tb.Fatalf("Cache-Control of the provisioning URI: got %q, want no-store", cc)
	}
	// JSON answers are not HTML-escaped: the URI's query reads as written.
	if body := string(r.Body); !strings.Contains(body, "&digits=6&") || strings.Contains(body, `\u0026`) {
		tb.Fatalf("enroll body escapes the URI: %s", body)
	}
	m := r.JSON(tb)
	if len(m) != 1 {
		tb.Fatalf("enroll body: got %v, want only provisioning_uri", m)
	}
	key, err := otp.NewKeyFromURL(m["provisioning_uri"].(string))
	if err != nil {
		tb.Fatal(err)
	}
	if key.Type() != "totp" || key.Issuer() != "sealbox" || key.Period() != 30 || key.Digits() != otp.DigitsSix || key.Algorithm() != otp.AlgorithmSHA1 {
		tb.Fatalf("provisioning URI parameters: %s", key)
	}
	return key.Secret()
}

// Code is secret's code at the test clock's time moved by steps.
func (ts *TestServer) Code(tb testing.TB, secret string, steps int) string {
	tb.Helper()
	code, err := totp.GenerateCodeCustom(secret, ts.Clock.Now().Add(time.Duration(steps)*step), testTOTPOpts)
	if err != nil {
		tb.Fatal(err)
	}
	return code
}

// WrongCode is a six-digit code that matches none of the steps accepted now.
func (ts *TestServer) WrongCode(tb testing.TB, secret string) string {
	tb.Helper()
	live := map[string]bool{ts.Code(tb, secret, -1): true, ts.Code(tb, secret, 0): true, ts.Code(tb, secret, 1): true}
	for n := 0; ; n++ {
		if c := strconv.Itoa(100000 + n); !live[c] {
			return c
		}
	}
}

// CodeReq sends a CodeRequest to a bearer second-factor endpoint.
func (ts *TestServer) CodeReq(tb testing.TB, path, access, code string) *Response {
	tb.Helper()
	return ts.Do(tb, Req{Method: "POST", Path: path, Token: access, Body: map[string]any{"totp_code": code}})
}

// RegisterWithTOTP registers email and confirms a second factor with the
// current step's code (which the replay ledger then holds). It returns the
// first token pair and the secret.
func (ts *TestServer) RegisterWithTOTP(tb testing.TB, email string) (Tokens, string) {
	tb.Helper()
	tok := ts.Register(tb, email)
	secret := ts.EnrollTOTP(tb, tok.Access)
	ts.CodeReq(tb, "/v1/auth/totp/verify-enrollment", tok.Access, ts.Code(tb, secret, 0)).WantStatus(tb, http.StatusNoContent)
	return tok, secret
}

// LoginChallenge signs in with the test password, expects 202 and returns
// the mfa_token.
func (ts *TestServer) LoginChallenge(tb testing.TB, email string, extra ...map[string]any) string {
	tb.Helper()
	r := ts.Do(tb, Req{Method: "POST", Path: "/v1/auth/login", Body: servertest.LoginBody(email, extra...)}).WantStatus(tb, http.StatusAccepted)
	m := r.JSON(tb)
	token, _ := m["mfa_token"].(string)
	if len(m) != 2 || !strings.HasPrefix(token, "sbx_mfa_") {
		tb.Fatalf("202 body: got %s, want {mfa_token, expires_by}", r.Body)
	}
	if got, want := m["expires_by"], float64(ts.Clock.Now().Add(5*time.Minute).Unix()); got != want {
		tb.Fatalf("expires_by: got %v, want %v", got, want)
	}
	return token
}

// VerifyTOTP posts to verify-totp.
func (ts *TestServer) VerifyTOTP(tb testing.TB, mfaToken, code string, extra ...map[string]any) *Response {
	tb.Helper()
	body := map[string]any{"mfa_token": mfaToken, "totp_code": code}
	for _, e := range extra {
		maps.Copy(body, e)
	}
	return ts.Do(tb, Req{Method: "POST", Path: "/v1/auth/login/verify-totp", Body: body})
}

func TestSecondFactorSignIn(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "alice@example.com")
	secret := ts.EnrollTOTP(t, tok.Access)

	// A pending enrollment leaves sign-in unchanged.
	ts.Login(t, "alice@example.com")

	ts.CodeReq(t, "/v1/auth/totp/verify-enrollment", tok.Access, ts.Code(t, secret, 0)).WantStatus(t, http.StatusNoContent)
	ts.Clock.Advance(step)

	mfa := ts.LoginChallenge(t, "alice@example.com", map[string]any{"cohort_hash": "at-login", "device_id": "0f8b8c2e-5d4a-4c3b-9a1e-2b7c6d5e4f30"})
	sessions, cohorts := ts.Ledger(t, tok.Access)
	if len(sessions) != 2 || len(cohorts) != 0 {
		t.Fatalf("after 202: got %d sessions and %d cohorts, want 2 and 0 (no session or cohort before verify-totp)", len(sessions), len(cohorts))
	}

	device := "6F9619FF-8B86-4D11-B42D-00C04FC964FF"
	pair := servertest.TokensOf(t, ts.VerifyTOTP(t, mfa, ts.Code(t, secret, 0), map[string]any{"cohort_hash": "at-verify", "device_id": device}))
	sessions, cohorts = ts.Ledger(t, pair.Access)
	if len(sessions) != 3 {
		t.Fatalf("sessions after verify-totp: got %d, want 3", len(sessions))
	}
	last := sessions[2]
	if last["current"] != true || last["cohort_hash"] != "at-verify" || last["device_id"] != strings.ToLower(device) {
		t.Fatalf("new session: got %v, want current with the verify request's identifiers", last)
	}
	if len(cohorts) != 1 || cohorts[0]["cohort_hash"] != "at-verify" {
		t.Fatalf("cohorts: got %v, want only the one verify-totp carried", cohorts)
	}
	// The refresh token of the new pair works.
	servertest.TokensOf(t, ts.Do(t, Req{Method: "POST", Path: "/v1/auth/refresh", Body: map[string]any{"refresh_token": pair.Refresh}}))

	// A challenge is good once.
	ts.VerifyTOTP(t, mfa, ts.Code(t, secret, 1)).WantProblem(t, http.StatusUnauthorized, fault.ECodeChallengeExpired)
}

// TestVerifyTOTPAfterDisable: a sign-in waiting at its second-factor step
// when the operator disables the account cannot complete it; the account
// stays shut until it is enabled again.
func TestVerifyTOTPAfterDisable(t *testing.T) {
	ts := MustOpenServer(t)
	_, secret := ts.RegisterWithTOTP(t, "alice@example.com")
	ts.Clock.Advance(step)
	mfa := ts.LoginChallenge(t, "alice@example.com")
	if _, err := ts.Store.SetDisabled("alice@example.com", true); err != nil {
		t.Fatal(err)
	}
	ts.VerifyTOTP(t, mfa, ts.Code(t, secret, 0)).WantProblem(t, http.StatusUnauthorized, fault.ECodeChallengeExpired)
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/login", Body: map[string]any{"email": "alice@example.com", "password": servertest.Password}}).
		WantProblem(t, http.StatusLocked, fault.ECodeAccountLocked)
	if _, err := ts.Store.SetDisabled("alice@example.com", false); err != nil {
		t.Fatal(err)
	}
	servertest.TokensOf(t, ts.VerifyTOTP(t, ts.LoginChallenge(t, "alice@example.com"), ts.Code(t, secret, 0)))
}

func TestTOTPConflicts(t *testing.T) {
	ts := MustOpenServer(t)
	// account registers the row's own account, its second factor confirmed
	// or pending as the row says, and sends a code with its token.
	account := func(confirmed, pending bool) func(testing.TB, *servertest.Scenario) {
		return func(tb testing.TB, sc *servertest.Scenario) {
			email := rowEmail(sc.Name)
			var tok Tokens
			switch {
			case confirmed:
				tok, _ = ts.RegisterWithTOTP(tb, email)
			case pending:
				tok = ts.Register(tb, email)
				ts.EnrollTOTP(tb, tok.Access)
			default:
				tok = ts.Register(tb, email)
			}
			sc.Method, sc.Token, sc.Body, sc.WantStatus = "POST", tok.Access, map[string]any{"totp_code": "123456"}, http.StatusConflict
		}
	}
	servertest.RunScenarios(t, ts.Client, []servertest.Scenario{
		{Name: "enroll while confirmed", Setup: account(true, false), Path: "/v1/auth/totp/enroll", WantCode: fault.ECodeTOTPAlreadyActive},
		{Name: "verify-enrollment with nothing pending", Setup: account(false, false), Path: "/v1/auth/totp/verify-enrollment", WantCode: fault.ECodeTOTPNothingPending},
		{Name: "verify-enrollment once confirmed", Setup: account(true, false), Path: "/v1/auth/totp/verify-enrollment", WantCode: fault.ECodeTOTPNothingPending},
		{Name: "disable when not enrolled", Setup: account(false, false), Path: "/v1/auth/totp/disable", WantCode: fault.ECodeTOTPNotEnrolled},
		{Name: "disable with only a pending enrollment", Setup: account(false, true), Path: "/v1/auth/totp/disable", WantCode: fault.ECodeTOTPNotEnrolled},
	})
}

// rowEmail is the address of a table row's own account on a server the
// rows share.
func rowEmail(row string) string {
	return strings.ReplaceAll(row, " ", "-") + "@example.com"
}

func TestPendingEnrollmentReplaced(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "alice@example.com")
	old := ts.EnrollTOTP(t, tok.Access)
	fresh := ts.EnrollTOTP(t, tok.Access)
	if old == fresh {
		t.Fatal("a new enrollment served the same secret")
	}
	ts.CodeReq(t, "/v1/auth/totp/verify-enrollment", tok.Access, ts.Code(t, old, 0)).WantProblem(t, http.StatusForbidden, fault.ECodeInvalidCode)
	ts.CodeReq(t, "/v1/auth/totp/verify-enrollment", tok.Access, ts.Code(t, fresh, 0)).WantStatus(t, http.StatusNoContent)
}

func TestCodeRequestValidation(t *testing.T) {
	tests := []servertest.Scenario{
		{Name: "missing code", Body: map[string]any{}, WantStatus: http.StatusUnprocessableEntity, WantCode: fault.ECodeInvalid},
		{Name: "null code", Body: map[string]any{"totp_code": nil}, WantStatus: http.StatusUnprocessableEntity, WantCode: fault.ECodeInvalid},
		{Name: "five digits", Body: map[string]any{"totp_code": "12345"}, WantStatus: http.StatusUnprocessableEntity, WantCode: fault.ECodeInvalid},
		{Name: "letters", Body: map[string]any{"totp_code": "12a456"}, WantStatus: http.StatusUnprocessableEntity, WantCode: fault.ECodeInvalid},
		{Name: "spaced", Body: map[string]any{"totp_code": "123 456"}, WantStatus: http.StatusUnprocessableEntity, WantCode: fault.ECodeInvalid},
		{Name: "a number", Body: map[string]any{"totp_code": 123456}, WantStatus: http.StatusBadRequest, WantCode: fault.ECodeMalformed},
		{Name: "unknown key", Body: map[string]any{"totp_code": "123456", "extra": 1}, WantStatus: http.StatusBadRequest, WantCode: fault.ECodeMalformed},
	}
	ts := MustOpenServer(t)
	tok, _ := ts.RegisterWithTOTP(t, "alice@example.com")
	for _, sc := range tests {
		for _, path := range []string{"/v1/auth/totp/verify-enrollment", "/v1/auth/totp/disable"} {
			sc.Method, sc.Path, sc.Token = "POST", path, tok.Access
			t.Run(sc.Name+" "+path, func(t *testing.T) { sc.Test(t, ts.Client) })
		}
	}
	t.Run("no token", func(t *testing.T) {
		ts.Do(t, Req{Method: "POST", Path: "/v1/auth/totp/enroll"}).WantProblem(t, http.StatusUnauthorized, fault.ECodeUnauthenticated)
	})
}

// A code whose step is not newer than the last accepted one is refused at
// each of the three endpoints that take a code: 401 before a session
// exists, 403 on a session.
func TestCodeReplayRefused(t *testing.T) {
	t.Run("verify-totp", func(t *testing.T) {
		ts := MustOpenServer(t)
		_, secret := ts.RegisterWithTOTP(t, "alice@example.com")
		mfa := ts.LoginChallenge(t, "alice@example.com")
		// The confirming code is spent at once, and so is an older step's.
		ts.VerifyTOTP(t, mfa, ts.Code(t, secret, 0)).WantProblem(t, http.StatusUnauthorized, fault.ECodeCodeReplayed)
		ts.VerifyTOTP(t, mfa, ts.Code(t, secret, -1)).WantProblem(t, http.StatusUnauthorized, fault.ECodeCodeReplayed)
		ts.VerifyTOTP(t, mfa, ts.Code(t, secret, 1)).WantStatus(t, http.StatusOK)
		// The next step's code is now spent too.
		ts.Clock.Advance(step)
		mfa = ts.LoginChallenge(t, "alice@example.com")
		ts.VerifyTOTP(t, mfa, ts.Code(t, secret, 0)).WantProblem(t, http.StatusUnauthorized, fault.ECodeCodeReplayed)
	})
	t.Run("disable", func(t *testing.T) {
		ts := MustOpenServer(t)
		tok, secret := ts.RegisterWithTOTP(t, "alice@example.com")
		ts.CodeReq(t, "/v1/auth/totp/disable", tok.Access, ts.Code(t, secret, 0)).WantProblem(t, http.StatusForbidden, fault.ECodeCodeReplayed)
	})
	t.Run("verify-enrollment", func(t *testing.T) {
		ts := MustOpenServer(t)
		tok, secret := ts.RegisterWithTOTP(t, "alice@example.com")
		ts.Clock.Advance(step)
		ts.CodeReq(t, "/v1/auth/totp/disable", tok.Access, ts.Code(t, secret, 0)).WantStatus(t, http.StatusNoContent)
		// The ledger is the account's: a new secret's code for a step
		// already accepted is refused.
		next := ts.EnrollTOTP(t, tok.Access)
		ts.CodeReq(t, "/v1/auth/totp/verify-enrollment", tok.Access, ts.Code(t, next, 0)).WantProblem(t, http.StatusForbidden, fault.ECodeCodeReplayed)
		ts.Clock.Advance(step)
		ts.CodeReq(t, "/v1/auth/totp/verify-enrollment", tok.Access, ts.Code(t, next, 0)).WantStatus(t, http.StatusNoContent)
	})
}

func TestDisable(t *testing.T) {
	ts := MustOpenServer(t)
	tok, secret := ts.RegisterWithTOTP(t, "alice@example.com")
	ts.Clock.Advance(step)
	ts.CodeReq(t, "/v1/auth/totp/disable", tok.Access, ts.WrongCode(t, secret)).WantProblem(t, http.StatusForbidden, fault.ECodeInvalidCode)
	ts.CodeReq(t, "/v1/auth/totp/disable", tok.Access, ts.Code(t, secret, -1)).WantProblem(t, http.StatusForbidden, fault.ECodeCodeReplayed)
	// Refused codes changed nothing: sign-in still asks for the second factor.
	ts.LoginChallenge(t, "alice@example.com")
	ts.CodeReq(t, "/v1/auth/totp/disable", tok.Access, ts.Code(t, secret, 0)).WantStatus(t, http.StatusNoContent)
	ts.Login(t, "alice@example.com")
	ts.CodeReq(t, "/v1/auth/totp/disable", tok.Access, ts.Code(t, secret, 1)).WantProblem(t, http.StatusConflict, fault.ECodeTOTPNotEnrolled)
}

func TestVerifyTOTPBurnsAfterFiveWrongCodes(t *testing.T) {
	ts := MustOpenServer(t)
	_, secret := ts.RegisterWithTOTP(t, "alice@example.com")
	ts.Clock.Advance(step)
	mfa := ts.LoginChallenge(t, "alice@example.com")
	for i := 0; i < 5; i++ {
		ts.VerifyTOTP(t, mfa, ts.WrongCode(t, secret)).WantProblem(t, http.StatusUnauthorized, fault.ECodeInvalidCode)
	}
	// Burned: even the right code is refused, as rate limited.
	r := ts.VerifyTOTP(t, mfa, ts.Code(t, secret, 0))
	r.WantProblem(t, http.StatusTooManyRequests, fault.ECodeRateLimited)
	if got := r.Header.Get("Retry-After"); got != "300" {
		t.Fatalf("Retry-After: got %q, want 300 (until the challenge would have expired)", got)
	}
	ts.Clock.Advance(2 * time.Minute)
	r = ts.VerifyTOTP(t, mfa, ts.Code(t, secret, 0))
	r.WantProblem(t, http.StatusTooManyRequests, fault.ECodeRateLimited)
	if got := r.Header.Get("Retry-After"); got != "180" {
		t.Fatalf("Retry-After: got %q, want 180", got)
	}
	ts.Clock.Advance(3 * time.Minute)
	ts.VerifyTOTP(t, mfa, ts.Code(t, secret, 0)).WantProblem(t, http.StatusUnauthorized, fault.ECodeChallengeExpired)
	// The burn is the challenge's: a new sign-in works.
	mfa = ts.LoginChallenge(t, "alice@example.com")
	ts.VerifyTOTP(t, mfa, ts.Code(t, secret, 0)).WantStatus(t, http.StatusOK)
}

func TestMFATokenRefused(t *testing.T) {
	ts := MustOpenServer(t)
	// challenge signs the row's own account in up to its second factor,
	// lets advance pass, and sends the current code with the token the row
	// makes of the challenge's (nil: the challenge's own).
	challenge := func(advance time.Duration, token func(issued string) string) func(testing.TB, *servertest.Scenario) {
		return func(tb testing.TB, sc *servertest.Scenario) {
			email := rowEmail(sc.Name)
			_, secret := ts.RegisterWithTOTP(tb, email)
			ts.Clock.Advance(step)
			mfa := ts.LoginChallenge(tb, email)
			ts.Clock.Advance(advance)
			if token != nil {
				mfa = token(mfa)
			}
			sc.Method, sc.Path = "POST", "/v1/auth/login/verify-totp"
			sc.Body = map[string]any{"mfa_token": mfa, "totp_code": ts.Code(tb, secret, 0)}
		}
	}
	servertest.RunScenarios(t, ts.Client, []servertest.Scenario{
		{Name: "just before expiry", Setup: challenge(5*time.Minute-time.Second, nil), WantStatus: http.StatusOK},
		{Name: "at expiry", Setup: challenge(5*time.Minute, nil), WantStatus: http.StatusUnauthorized, WantCode: fault.ECodeChallengeExpired},
		{Name: "unknown", Setup: challenge(0, func(string) string { return "sbx_mfa_" + strings.Repeat("A", 43) }), WantStatus: http.StatusUnauthorized, WantCode: fault.ECodeChallengeExpired},
		{Name: "malformed", Setup: challenge(0, func(issued string) string { return issued + "x" }), WantStatus: http.StatusUnauthorized, WantCode: fault.ECodeChallengeExpired},
		{Name: "another type of token", Setup: challenge(0, func(issued string) string { return "sbx_rt_" + issued[len("sbx_mfa_"):] }), WantStatus: http.StatusUnauthorized, WantCode: fault.ECodeChallengeExpired},
	})
}

func TestVerifyTOTPConcurrentSubmissions(t *testing.T) {
	tests := []struct {
		name       string
		challenges int // one code sent once per challenge, or twice to one
		loserCode  string
	}{
		{name: "one code on two challenges", challenges: 2, loserCode: fault.ECodeCodeReplayed},
		{name: "one code twice on one challenge", challenges: 1, loserCode: fault.ECodeChallengeExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := MustOpenServer(t)
			_, secret := ts.RegisterWithTOTP(t, "alice@example.com")
			ts.Clock.Advance(step)
			tokens := []string{ts.LoginChallenge(t, "alice@example.com")}
			if tt.challenges == 2 {
				tokens = append(tokens, ts.LoginChallenge(t, "alice@example.com"))
			} else {
				tokens = append(tokens, tokens[0])
			}
			code := ts.Code(t, secret, 0)
			results := make([]*Response, 2)
			var wg sync.WaitGroup
			for i := range results {
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[i] = ts.VerifyTOTP(t, tokens[i], code)
				}()
			}
			wg.Wait()
			ok := 0
			for _, r := range results {
				if r.Status == http.StatusOK {
					ok++
					continue
				}
				r.WantProblem(t, http.StatusUnauthorized, tt.loserCode)
			}
			if ok != 1 {
				t.Fatalf("successes: got %d, want exactly 1", ok)
			}
		})
	}
}

// The lockout count charged by a login that answers 202 stays until
// verify-totp completes the sign-in: abandoned challenges lock like failed
// passwords, and a completed sign-in clears the count.
func TestSecondFactorLockout(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.LockoutFailures = 3 })
	_, secret := ts.RegisterWithTOTP(t, "alice@example.com")
	ts.Clock.Advance(step)
	ts.LoginChallenge(t, "alice@example.com")
	mfa := ts.LoginChallenge(t, "alice@example.com")
	ts.VerifyTOTP(t, mfa, ts.Code(t, secret, 0)).WantStatus(t, http.StatusOK)
	for i := 0; i < 3; i++ {
		ts.LoginChallenge(t, "alice@example.com")
	}
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/login", Body: map[string]any{"email": "alice@example.com", "password": servertest.Password}}).
		WantProblem(t, http.StatusLocked, fault.ECodeAccountLocked)
}

// A copy of the database alone reveals no TOTP secret, pending or confirmed.
func TestTOTPSecretSealedAtRest(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "alice@example.com")
	pending := ts.EnrollTOTP(t, tok.Access)
	assertNotInDB(t, ts, pending)
	confirmed := ts.EnrollTOTP(t, tok.Access)
	ts.CodeReq(t, "/v1/auth/totp/verify-enrollment", tok.Access, ts.Code(t, confirmed, 0)).WantStatus(t, http.StatusNoContent)
	assertNotInDB(t, ts, pending)
	assertNotInDB(t, ts, confirmed)
}

func assertNotInDB(t *testing.T, ts *TestServer, secret string) {
	t.Helper()
	raw := ts.RawStore(t)
	secretBytes, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(secret)
	if err != nil {
		t.Fatal(err)
	}
	for name, needle := range map[string][]byte{
		"base32 secret":            []byte(secret),
		"lowercase base32 secret":  []byte(strings.ToLower(secret)),
		"raw secret bytes":         secretBytes,
		"the secret's first half":  secretBytes[:len(secretBytes)/2],
		"the secret's second half": secretBytes[len(secretBytes)/2:],
	} {
		if bytes.Contains(raw, needle) {
			t.Fatalf("the database file holds the %s", name)
		}
	}
}

// The operator's reset (sealbox users reset-2fa) turns the second factor
// off and closes every session; sign-in is then by password alone.
func TestOperatorResetOfSecondFactor(t *testing.T) {
	ts := MustOpenServer(t)
	tok, _ := ts.RegisterWithTOTP(t, "lost@example.org")
	ts.LoginChallenge(t, "lost@example.org")
	removed, revoked, err := ts.Store.ResetSecondFactor("lost@example.org")
	if err != nil || !removed || revoked != 1 {
		t.Fatalf("reset: removed %v, %d sessions closed, %v", removed, revoked, err)
	}
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: tok.Access}).WantProblem(t, 401, "error.auth.unauthenticated")
	ts.Login(t, "lost@example.org")
}
