package server_test

import (
	"bytes"
	"net/http"
	"testing"

	"sealbox/server/servertest"
)

// TestDeleteAccount: DELETE /v1/auth/account needs a fresh session and the
// password; then the account's tokens stop, what it alone held is no longer
// recorded while a blob another account holds stays readable, and the
// email registers again as a new account.
func TestDeleteAccount(t *testing.T) {
	ts := MustOpenServer(t)
	alice, bob := ts.Register(t, "alice@example.org"), ts.Register(t, "bob@example.org")
	shared, own := bytes.Repeat([]byte("shared;"), 4000), bytes.Repeat([]byte("alice;"), 4000)
	ts.Upload(t, alice.Access, shared)
	ownHash := ts.Upload(t, alice.Access, own)
	sharedHash := ts.Upload(t, bob.Access, shared)
	aliceID := ts.UserID(t, alice.Access)
	del := func(tok, pw string) *servertest.Response {
		return ts.Do(t, Req{Method: "DELETE", Path: "/v1/auth/account", Token: tok, Body: map[string]any{"password": pw}})
	}
	del("", servertest.Password).WantProblem(t, http.StatusUnauthorized, "error.auth.unauthenticated")
	ts.Clock.Advance(ts.Config.FreshWindow)
	del(alice.Access, servertest.Password).WantProblem(t, http.StatusForbidden, "error.auth.reauth_required")
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/reauthenticate", Token: alice.Access, Body: map[string]any{"password": servertest.Password}}).WantStatus(t, 200)
	ts.Do(t, Req{Method: "DELETE", Path: "/v1/auth/account", Token: alice.Access, Body: map[string]any{}}).
		WantProblem(t, http.StatusUnprocessableEntity, "error.request.invalid")
	del(alice.Access, "not the password").WantProblem(t, http.StatusUnauthorized, "error.auth.invalid_credentials")
	if _, err := ts.Store.AccountByEmail("alice@example.org"); err != nil {
		t.Fatalf("a refused deletion deleted: %v", err)
	}
	del(alice.Access, servertest.Password).WantStatus(t, http.StatusNoContent)

	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: alice.Access}).WantProblem(t, http.StatusUnauthorized, "error.auth.unauthenticated")
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/refresh", Body: map[string]any{"refresh_token": alice.Refresh}}).
		WantProblem(t, http.StatusUnauthorized, "error.auth.session_expired")
	recorded, err := ts.Store.BlobsRecorded([]string{sharedHash, ownHash})
	if err != nil || !recorded[sharedHash] || recorded[ownHash] {
		t.Fatalf("recorded after the deletion: %v %v (want the shared blob only)", recorded, err)
	}
	if r := ts.Do(t, Req{Method: "GET", Path: "/v1/blobs/" + sharedHash, Token: bob.Access}).WantStatus(t, http.StatusOK); !bytes.Equal(r.Body, shared) {
		t.Fatal("bob's copy of the shared blob changed")
	}
	again := ts.Register(t, "alice@example.org")
	if id := ts.UserID(t, again.Access); id == aliceID {
		t.Fatal("the email registered again under the deleted account's id")
	}
	if n, err := ts.Store.HeldBytes(ts.UserID(t, again.Access)); err != nil || n != 0 {
		t.Fatalf("the new account holds %d bytes (%v)", n, err)
	}
}
