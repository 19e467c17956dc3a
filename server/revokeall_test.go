package server_test

import (
	"strings"
	"testing"
	"time"

	"sealbox/server/hybridsig"
	"sealbox/server/servertest"
)

// The signing bytes themselves are checked against the committed vector
// (testdata/revoke_all_vector.json) by TestRevokeAllVector in
// server/hybridsig; these tests check the endpoints around them.

// challenge asks for a revoke-all challenge with a session token.
func (ts *TestServer) challenge(tb testing.TB, access string) string {
	tb.Helper()
	m := ts.Do(tb, Req{Method: "POST", Path: "/v1/auth/logout/all/challenge", Token: access}).WantStatus(tb, 200).JSON(tb)
	return m["challenge"].(string)
}

// proof signs revoke_all_signing_bytes for the account and challenge.
func proof(key *hybridsig.DevKey, userID, challenge string) string {
	return key.SignBase64(hybridsig.RevokeAllSigningBytes(userID, challenge))
}

func (ts *TestServer) revokeAll(tb testing.TB, challenge, proof string) *Response {
	tb.Helper()
	return ts.Do(tb, Req{Method: "POST", Path: "/v1/auth/logout/all", Body: map[string]any{"challenge": challenge, "proof": proof}})
}

func TestRevokeAllWithProof(t *testing.T) {
	ts, first, id := openPinnedAccount(t)
	second := ts.Login(t, "a@example.org")
	third := ts.Login(t, "a@example.org")
	bystander := ts.Register(t, "b@example.org")

	r := ts.Do(t, Req{Method: "POST", Path: "/v1/auth/logout/all/challenge", Token: second.Access}).WantStatus(t, 200)
	m := r.JSON(t)
	ch := m["challenge"].(string)
	if !strings.HasPrefix(ch, "sbx_ch_") || len(ch) != len("sbx_ch_")+43 {
		t.Fatalf("challenge shape: %q", ch)
	}
	if m["expires_at"] != "2026-11-22T10:05:00Z" {
		t.Fatalf("expires_at: %v", m["expires_at"])
	}
	got := ts.revokeAll(t, ch, proof(aliceKey, id, ch)).WantStatus(t, 200).JSON(t)
	if got["revoked"] != float64(3) {
		t.Fatalf("revoked: got %v, want 3", got["revoked"])
	}
	for _, tok := range []Tokens{first, second, third} {
		ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: tok.Access}).WantProblem(t, 401, "error.auth.unauthenticated")
		ts.Do(t, Req{Method: "POST", Path: "/v1/auth/refresh", Body: map[string]any{"refresh_token": tok.Refresh}}).WantProblem(t, 401, "error.auth.session_expired")
	}
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: bystander.Access}).WantStatus(t, 200)
	// The challenge was spent by the success too.
	ts.revokeAll(t, ch, proof(aliceKey, id, ch)).WantProblem(t, 401, "error.auth.challenge_expired")
}

func TestRevokeAllRefusals(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	id := ts.UserID(t, tok.Access)
	other := ts.Register(t, "b@example.org")
	otherID := ts.UserID(t, other.Access)
	ts.publish(t, tok.Access, aliceKey.PublicKeyBase64(), directoryBody(t, 1, 1)).WantStatus(t, 200)
	valid := proof(aliceKey, id, "sbx_ch_x")
	// signed sends, over a fresh challenge, the proof the row makes of it;
	// burned checks that the refusal burned the challenge (a good proof is
	// now too late) and revoked nothing.
	signed := func(proofOf func(ch string) string) func(testing.TB, *servertest.Scenario) {
		return func(tb testing.TB, sc *servertest.Scenario) {
			ch := ts.challenge(tb, tok.Access)
			sc.Method, sc.Path = "POST", "/v1/auth/logout/all"
			sc.Body = map[string]any{"challenge": ch, "proof": proofOf(ch)}
		}
	}
	burned := func(tb testing.TB, sc servertest.Scenario, _ *Response) {
		ch := sc.Body.(map[string]any)["challenge"].(string)
		ts.revokeAll(tb, ch, proof(aliceKey, id, ch)).WantProblem(tb, 401, "error.auth.challenge_expired")
		ts.Do(tb, Req{Method: "GET", Path: "/v1/auth/profile", Token: tok.Access}).WantStatus(tb, 200)
	}
	refused := func(name string, proofOf func(ch string) string) servertest.Scenario {
		return servertest.Scenario{Name: name, Setup: signed(proofOf), Teardown: burned, WantStatus: 401, WantCode: "error.auth.proof_required"}
	}
	servertest.RunScenarios(t, ts.Client, []servertest.Scenario{
		refused("signed by another key", func(ch string) string { return proof(bobKey, id, ch) }),
		refused("signed for another account", func(ch string) string { return proof(aliceKey, otherID, ch) }),
		refused("signed over another challenge", func(string) string { return valid }),
		refused("one bit flipped", func(ch string) string {
			p := []byte(proof(aliceKey, id, ch))
			p[10] ^= 1
			return string(p)
		}),
		refused("not base64", func(string) string { return "not a proof" }),
		refused("empty", func(string) string { return "" }),
		refused("truncated", func(ch string) string { return proof(aliceKey, id, ch)[:100] }),
	})

	bodyCases := []servertest.Scenario{
		{Name: "unknown challenge", Body: map[string]any{"challenge": "sbx_ch_never-issued", "proof": valid}, WantStatus: 401, WantCode: "error.auth.challenge_expired"},
		{Name: "empty challenge", Body: map[string]any{"challenge": "", "proof": valid}, WantStatus: 401, WantCode: "error.auth.challenge_expired"},
		{Name: "missing challenge", Body: map[string]any{"proof": valid}, WantStatus: 422, WantCode: "error.request.invalid"},
		{Name: "unknown key", Body: map[string]any{"challenge": "sbx_ch_x", "proof": valid, "user_id": id}, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "proof of the wrong type", Body: map[string]any{"challenge": "sbx_ch_x", "proof": 5}, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "not JSON", Body: "{", WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "wrong content type", Body: `{"challenge":"x","proof":"y"}`, ContentType: "text/plain", WantStatus: 415, WantCode: "error.request.unsupported_media_type"},
	}
	for _, sc := range bodyCases {
		sc.Method, sc.Path = "POST", "/v1/auth/logout/all"
		t.Run(sc.Name, func(t *testing.T) { sc.Test(t, ts.Client) })
	}
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/logout/all/challenge"}).WantProblem(t, 401, "error.auth.unauthenticated")
}

// TestRevokeAllMissingProof: a body without a proof, or with a null one, is
// a missing master-key proof, 401 (interface, Conventions 5), and like any
// refused proof it costs the challenge.
func TestRevokeAllMissingProof(t *testing.T) {
	ts, tok, id := openPinnedAccount(t)
	for name, body := range map[string]func(ch string) map[string]any{
		"absent": func(ch string) map[string]any { return map[string]any{"challenge": ch} },
		"null":   func(ch string) map[string]any { return map[string]any{"challenge": ch, "proof": nil} },
	} {
		t.Run(name, func(t *testing.T) {
			ch := ts.challenge(t, tok.Access)
			ts.Do(t, Req{Method: "POST", Path: "/v1/auth/logout/all", Body: body(ch)}).WantProblem(t, 401, "error.auth.proof_required")
			ts.revokeAll(t, ch, proof(aliceKey, id, ch)).WantProblem(t, 401, "error.auth.challenge_expired")
			ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: tok.Access}).WantStatus(t, 200)
		})
	}
}

func TestRevokeAllReusedChallenge(t *testing.T) {
	ts, tok, id := openPinnedAccount(t)
	ch := ts.challenge(t, tok.Access)
	p := proof(aliceKey, id, ch)
	ts.revokeAll(t, ch, p).WantStatus(t, 200)
	// A replay of the same good request after sign-in again revokes nothing.
	again := ts.Login(t, "a@example.org")
	ts.revokeAll(t, ch, p).WantProblem(t, 401, "error.auth.challenge_expired")
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: again.Access}).WantStatus(t, 200)
}

func TestRevokeAllWithoutPinnedKey(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	id := ts.UserID(t, tok.Access)
	ch := ts.challenge(t, tok.Access)
	ts.revokeAll(t, ch, proof(aliceKey, id, ch)).WantProblem(t, 401, "error.auth.proof_required")
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: tok.Access}).WantStatus(t, 200)
}

func TestRevokeAllChallengeExpires(t *testing.T) {
	ts, tok, id := openPinnedAccount(t)
	ch := ts.challenge(t, tok.Access)
	ts.Clock.Advance(5 * time.Minute)
	ts.revokeAll(t, ch, proof(aliceKey, id, ch)).WantProblem(t, 401, "error.auth.challenge_expired")
	// One second before expiry still works.
	ch = ts.challenge(t, tok.Access)
	ts.Clock.Advance(5*time.Minute - time.Second)
	ts.revokeAll(t, ch, proof(aliceKey, id, ch)).WantStatus(t, 200)
}

// A stolen access token can end its own session (logout) but never the
// others: the challenge it can obtain is worthless without the identity key.
func TestStolenAccessTokenCannotRevokeAll(t *testing.T) {
	ts, victim, id := openPinnedAccount(t)
	stolen := ts.Login(t, "a@example.org")
	// The thief cannot swap in its own key...
	ts.publish(t, stolen.Access, bobKey.PublicKeyBase64(), directoryBody(t, 2, 2)).WantProblem(t, 403, "error.directory.identity_key_mismatch")
	// ...so its own key's proof is refused.
	ch := ts.challenge(t, stolen.Access)
	ts.revokeAll(t, ch, proof(bobKey, id, ch)).WantProblem(t, 401, "error.auth.proof_required")
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/logout", Token: stolen.Access}).WantStatus(t, 204)
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: victim.Access}).WantStatus(t, 200)
}

// openPinnedAccount is where most revoke-all tests start: a fresh server and
// one account (a@example.org, signed in as tok) that has published a
// directory pinning aliceKey as its identity key.
func openPinnedAccount(tb testing.TB) (ts *TestServer, tok Tokens, userID string) {
	tb.Helper()
	ts = MustOpenServer(tb)
	tok = ts.Register(tb, "a@example.org")
	ts.publish(tb, tok.Access, aliceKey.PublicKeyBase64(), directoryBody(tb, 1, 1)).WantStatus(tb, 200)
	return ts, tok, ts.UserID(tb, tok.Access)
}
