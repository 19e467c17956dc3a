package server_test

import (
	"net/http"
	"testing"

	"sealbox/kv/fault"
	"sealbox/server/servertest"
)

// TestPendingChallengeEndsWithTheOwnersIntent: a sign-in held at its second
// factor (the 202 mfa_token) cannot be finished once the account's owner
// changed the password, signed out everywhere, turned the second factor off
// (and on again), or once the operator reset it: each deletes the account's
// pending challenges, and the right code then meets 401
// error.auth.challenge_expired.
func TestPendingChallengeEndsWithTheOwnersIntent(t *testing.T) {
	tests := []struct {
		name string
		// end acts for the owner between the 202 and verify-totp, and
		// returns the secret whose code is then presented.
		end func(t *testing.T, ts *TestServer, tok Tokens, secret string) string
	}{
		{name: "password change", end: func(t *testing.T, ts *TestServer, tok Tokens, secret string) string {
			ts.Do(t, Req{Method: "POST", Path: "/v1/auth/password", Token: tok.Access,
				Body: map[string]any{"current_password": servertest.Password, "new_password": servertest.Password}}).WantStatus(t, http.StatusNoContent)
			return secret
		}},
		{name: "global sign-out", end: func(t *testing.T, ts *TestServer, tok Tokens, secret string) string {
			ts.publish(t, tok.Access, aliceKey.PublicKeyBase64(), directoryBody(t, 1, 1)).WantStatus(t, http.StatusOK)
			ch := ts.challenge(t, tok.Access)
			ts.revokeAll(t, ch, proof(aliceKey, ts.UserID(t, tok.Access), ch)).WantStatus(t, http.StatusOK)
			return secret
		}},
		{name: "second factor disabled and enrolled again", end: func(t *testing.T, ts *TestServer, tok Tokens, secret string) string {
			ts.CodeReq(t, "/v1/auth/totp/disable", tok.Access, ts.Code(t, secret, 0)).WantStatus(t, http.StatusNoContent)
			next := ts.EnrollTOTP(t, tok.Access)
			ts.Clock.Advance(step)
			ts.CodeReq(t, "/v1/auth/totp/verify-enrollment", tok.Access, ts.Code(t, next, 0)).WantStatus(t, http.StatusNoContent)
			ts.Clock.Advance(step)
			return next
		}},
		{name: "operator reset-2fa, then enrolled again", end: func(t *testing.T, ts *TestServer, _ Tokens, _ string) string {
			if removed, _, err := ts.Store.ResetSecondFactor("alice@example.com"); err != nil || !removed {
				t.Fatalf("reset: removed %v, %v", removed, err)
			}
			tok := ts.Login(t, "alice@example.com")
			next := ts.EnrollTOTP(t, tok.Access)
			ts.Clock.Advance(step)
			ts.CodeReq(t, "/v1/auth/totp/verify-enrollment", tok.Access, ts.Code(t, next, 0)).WantStatus(t, http.StatusNoContent)
			ts.Clock.Advance(step)
			return next
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := MustOpenServer(t)
			tok, secret := ts.RegisterWithTOTP(t, "alice@example.com")
			ts.Clock.Advance(step)
			mfa := ts.LoginChallenge(t, "alice@example.com")
			code := ts.Code(t, tt.end(t, ts, tok, secret), 0)
			ts.VerifyTOTP(t, mfa, code).WantProblem(t, http.StatusUnauthorized, fault.ECodeChallengeExpired)
		})
	}
	// The control: a challenge nobody ended completes.
	t.Run("untouched", func(t *testing.T) {
		ts := MustOpenServer(t)
		_, secret := ts.RegisterWithTOTP(t, "alice@example.com")
		ts.Clock.Advance(step)
		mfa := ts.LoginChallenge(t, "alice@example.com")
		ts.VerifyTOTP(t, mfa, ts.Code(t, secret, 0)).WantStatus(t, http.StatusOK)
	})
}
