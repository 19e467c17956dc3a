package server_test

import (
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/server"
	"sealbox/server/servertest"
)

func registerBody(email, code string) map[string]any {
	body := map[string]any{"email": email, "password": servertest.Password}
	if code != "" {
		body["invite_code"] = code
	}
	return body
}

// TestRegisterByInvitation: in invite mode a registration needs a live
// invitation; a missing, wrong, spent, expired or revoked code, and one
// bound to another email, answer one identical 403; a valid one creates
// the account with the invitation's quota, or the default, and is spent.
func TestRegisterByInvitation(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.Registration = server.RegistrationInvite; c.DefaultQuota = 1 << 30 })
	quota := int64(5 << 30)
	for _, inv := range []struct {
		kv.Invite
		code string
	}{
		{kv.Invite{ID: "inv-bound", Email: "ann@example.org", ExpiresAt: ts.Clock.Now().Add(time.Hour), QuotaBytes: &quota}, "sbx_in_bound"},
		{kv.Invite{ID: "inv-open", ExpiresAt: ts.Clock.Now().Add(time.Hour)}, "sbx_in_open"},
		{kv.Invite{ID: "inv-short", ExpiresAt: ts.Clock.Now().Add(time.Minute)}, "sbx_in_short"},
		{kv.Invite{ID: "inv-revoked", ExpiresAt: ts.Clock.Now().Add(time.Hour)}, "sbx_in_revoked"},
	} {
		if err := ts.Store.CreateInvite(inv.Invite, inv.code); err != nil {
			t.Fatal(err)
		}
	}
	if err := ts.Store.RevokeInvite("inv-revoked"); err != nil {
		t.Fatal(err)
	}
	ts.Clock.Advance(time.Minute) // inv-short expires
	var first map[string]any
	refuse := func(email, code string) {
		t.Helper()
		p := ts.Do(t, Req{Method: "POST", Path: "/v1/auth/register", Body: registerBody(email, code)}).
			WantProblem(t, 403, "error.registration.invite_required")
		if first == nil {
			first = p
		} else if p["detail"] != first["detail"] {
			t.Fatalf("the refusals differ: %q, %q", p["detail"], first["detail"])
		}
	}
	refuse("bob@example.org", "")               // missing
	refuse("bob@example.org", "sbx_in_wrong")   // never issued
	refuse("bob@example.org", "sbx_in_short")   // expired
	refuse("bob@example.org", "sbx_in_revoked") // revoked
	refuse("bob@example.org", "sbx_in_bound")   // bound to another email
	// An invalid body is still 422 before any code is looked at.
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/register", Body: map[string]any{"email": "x", "password": servertest.Password, "invite_code": "sbx_in_open"}}).
		WantProblem(t, 422, "error.request.invalid")
	servertest.TokensOf(t, ts.Do(t, Req{Method: "POST", Path: "/v1/auth/register", Body: registerBody(" Ann@Example.org", "sbx_in_bound")}))
	refuse("ann2@example.org", "sbx_in_bound") // spent
	servertest.TokensOf(t, ts.Do(t, Req{Method: "POST", Path: "/v1/auth/register", Body: registerBody("cy@example.org", "sbx_in_open")}))
	for email, want := range map[string]int64{"ann@example.org": quota, "cy@example.org": 1 << 30} {
		if a, err := ts.Store.AccountByEmail(email); err != nil || a.QuotaBytes != want {
			t.Fatalf("%s's quota: got %+v %v, want %d", email, a, err, want)
		}
	}
	if list, err := ts.Store.Invites(); err != nil || len(list) != 0 {
		t.Fatalf("outstanding after both were spent: %+v %v", list, err)
	}
}

// TestInviteAlreadyRegistered: an invitation used by an email that already
// has an account answers 409 and stays unspent.
func TestInviteAlreadyRegistered(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.Registration = server.RegistrationInvite })
	for _, code := range []string{"sbx_in_1", "sbx_in_2"} {
		if err := ts.Store.CreateInvite(kv.Invite{ID: code, ExpiresAt: ts.Clock.Now().Add(time.Hour)}, code); err != nil {
			t.Fatal(err)
		}
	}
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/register", Body: registerBody("a@example.org", "sbx_in_1")}).WantStatus(t, 200)
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/register", Body: registerBody("a@example.org", "sbx_in_2")}).
		WantProblem(t, 409, "error.account.exists")
	if list, err := ts.Store.Invites(); err != nil || len(list) != 1 || list[0].ID != "sbx_in_2" {
		t.Fatalf("the invitation of a refused registration was spent: %+v %v", list, err)
	}
}

// TestOpenRegistrationIgnoresInviteCode: outside invite mode the field is
// accepted and nothing is spent.
func TestOpenRegistrationIgnoresInviteCode(t *testing.T) {
	ts := MustOpenServer(t)
	if err := ts.Store.CreateInvite(kv.Invite{ID: "inv", ExpiresAt: ts.Clock.Now().Add(time.Hour)}, "sbx_in_1"); err != nil {
		t.Fatal(err)
	}
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/register", Body: registerBody("a@example.org", "sbx_in_wrong")}).WantStatus(t, 200)
	if list, err := ts.Store.Invites(); err != nil || len(list) != 1 {
		t.Fatalf("open registration spent an invitation: %+v %v", list, err)
	}
	closed := MustOpenServer(t, func(c *server.Config) { c.Registration = server.RegistrationClosed })
	closed.Do(t, Req{Method: "POST", Path: "/v1/auth/register", Body: registerBody("a@example.org", "sbx_in_1")}).
		WantProblem(t, 403, "error.registration.closed")
}
