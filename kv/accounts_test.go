package kv_test

import (
	"testing"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/kv/kvtest"
)

// TestAccounts: an address is registered once; accounts are found by id and
// email; the display name is set and cleared.
func TestAccounts(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	a := mustAccount(t, s, c, 1)
	if err := s.AddAccount(&kv.Account{ID: "acct-dup", Email: a.Email}); fault.ErrorCode(err) != fault.ECodeAccountExists {
		t.Fatalf("a second account for one address: %v", err)
	}
	if got, err := s.Account(a.ID); err != nil || got.Email != a.Email {
		t.Fatalf("by id: %+v %v", got, err)
	}
	if got, err := s.AccountByEmail(a.Email); err != nil || got == nil || got.ID != a.ID {
		t.Fatalf("by email: %+v %v", got, err)
	}
	if _, err := s.AccountByEmail("nobody@example.org"); fault.ErrorCode(err) != fault.ECodeAccountNotFound {
		t.Fatalf("an unknown address: %v", err)
	}
	if _, err := s.Account("acct-none"); fault.ErrorCode(err) != fault.ECodeAccountNotFound {
		t.Fatalf("an unknown id: %v", err)
	}
	name := "Alice"
	if got, err := s.SetDisplayName(a.ID, &name); err != nil || got.DisplayName == nil || *got.DisplayName != "Alice" {
		t.Fatalf("set: %+v %v", got, err)
	}
	if got, err := s.SetDisplayName(a.ID, nil); err != nil || got.DisplayName != nil {
		t.Fatalf("clear: %+v %v", got, err)
	}
}
