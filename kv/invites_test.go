package kv_test

import (
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/kv/kvtest"
)

// TestInvites: an invitation is listed until it is spent, revoked or
// expired, and then refuses like a code never issued; one bound to an
// email refuses every other; its quota is the new account's; the code is
// kept as its hash only.
func TestInvites(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	quota := int64(5 << 30)
	for _, inv := range []struct {
		kv.Invite
		code string
	}{
		{kv.Invite{ID: "inv-open", ExpiresAt: c.Now().Add(time.Hour)}, "sbx_in_open"},
		{kv.Invite{ID: "inv-bound", Email: "ann@example.org", ExpiresAt: c.Now().Add(2 * time.Hour), QuotaBytes: &quota}, "sbx_in_bound"},
		{kv.Invite{ID: "inv-revoked", ExpiresAt: c.Now().Add(time.Hour)}, "sbx_in_revoked"},
	} {
		if err := s.CreateInvite(inv.Invite, inv.code); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Second)
	}
	assertFileLacks(t, s.Path(), "sbx_in_open", "sbx_in_bound")
	if err := s.RevokeInvite("inv-revoked"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"inv-revoked", "nothing"} {
		if err := s.RevokeInvite(id); fault.ErrorCode(err) != fault.ECodeInviteNotFound {
			t.Fatalf("revoking %s again: got %v, want %s", id, err, fault.ECodeInviteNotFound)
		}
	}
	list, err := s.Invites()
	if err != nil || len(list) != 2 || list[0].ID != "inv-open" || list[1].ID != "inv-bound" || list[1].Email != "ann@example.org" || *list[1].QuotaBytes != quota {
		t.Fatalf("outstanding invitations: %+v %v", list, err)
	}
	register := func(code, email string) error {
		a := &kv.Account{ID: "acct-" + email, Email: email, CreatedAt: c.Now(), QuotaBytes: 7}
		return s.CreateInvitedAccount(code, a, newSession(c, a.ID, "sess-"+email), "at-"+email, "rt-"+email)
	}
	refused := []struct{ code, email string }{
		{"sbx_in_wrong", "bob@example.org"},
		{"sbx_in_revoked", "bob@example.org"},
		{"sbx_in_bound", "bob@example.org"}, // another email
	}
	for _, r := range refused {
		if err := s.CheckInvite(r.code, r.email); fault.ErrorCode(err) != fault.ECodeInviteRequired {
			t.Fatalf("check %s for %s: got %v", r.code, r.email, err)
		}
		if err := register(r.code, r.email); fault.ErrorCode(err) != fault.ECodeInviteRequired {
			t.Fatalf("register with %s as %s: got %v", r.code, r.email, err)
		}
	}
	if _, err := s.AccountByEmail("bob@example.org"); fault.ErrorCode(err) != fault.ECodeAccountNotFound {
		t.Fatalf("a refused invitation created an account: %v", err)
	}
	if err := s.CheckInvite("sbx_in_bound", "ann@example.org"); err != nil {
		t.Fatal(err)
	}
	if err := register("sbx_in_bound", "ann@example.org"); err != nil {
		t.Fatal(err)
	}
	if a, err := s.AccountByEmail("ann@example.org"); err != nil || a.QuotaBytes != quota {
		t.Fatalf("the invited account's quota: %+v %v", a, err)
	}
	if err := register("sbx_in_bound", "ann2@example.org"); fault.ErrorCode(err) != fault.ECodeInviteRequired {
		t.Fatalf("a spent invitation: got %v", err)
	}
	// Without a quota of its own, the account keeps the one it was given.
	if err := register("sbx_in_open", "cy@example.org"); err != nil {
		t.Fatal(err)
	}
	if a, err := s.AccountByEmail("cy@example.org"); err != nil || a.QuotaBytes != 7 {
		t.Fatalf("the default quota: %+v %v", a, err)
	}
	if list, err := s.Invites(); err != nil || len(list) != 0 {
		t.Fatalf("spent invitations are still listed: %+v %v", list, err)
	}
}

// TestInviteExpiry: an invitation is dead from its expiry instant, no
// longer listed, and swept.
func TestInviteExpiry(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	if err := s.CreateInvite(kv.Invite{ID: "inv-1", ExpiresAt: c.Now().Add(time.Hour)}, "sbx_in_1"); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Hour - time.Nanosecond)
	if err := s.CheckInvite("sbx_in_1", "a@example.org"); err != nil {
		t.Fatalf("just before its expiry: %v", err)
	}
	c.Advance(time.Nanosecond)
	if err := s.CheckInvite("sbx_in_1", "a@example.org"); fault.ErrorCode(err) != fault.ECodeInviteRequired {
		t.Fatalf("at its expiry: got %v", err)
	}
	if list, err := s.Invites(); err != nil || len(list) != 0 {
		t.Fatalf("an expired invitation is listed: %+v %v", list, err)
	}
	if n, err := s.Sweep(); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	if err := s.RevokeInvite("inv-1"); fault.ErrorCode(err) != fault.ECodeInviteNotFound {
		t.Fatalf("a swept invitation: got %v", err)
	}
}
