package kv_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/kv/kvtest"
)

// TestAdminOperations: the operator's listing, disabling (which closes every
// session), quota and second-factor reset.
func TestAdminOperations(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	b := mustAccount(t, s, c, 1)                                               // u1@example.org, one session
	holdVia(t, s, "acct-a", "album-a", kv.Blob{Hash: hexHash('a'), Size: 100}) // acct-a@example.org
	a, err := s.AccountByEmail("acct-a@example.org")
	if err != nil {
		t.Fatal(err)
	}
	list, err := s.UserSummaries()
	if err != nil || len(list) != 2 || list[0].Account.Email != a.Email || list[1].Account.Email != b.Email {
		t.Fatalf("listing by email: %+v %v", list, err)
	}
	sum, err := s.UserSummary(a.Email)
	if err != nil || sum.LiveSessions != 0 || sum.Albums != 1 || sum.BlobsHeld != 1 || sum.BytesHeld != 100 {
		t.Fatalf("summary: %+v %v", sum, err)
	}
	if n, err := s.SetDisabled(b.Email, true); err != nil || n != 1 {
		t.Fatalf("disable: %d %v", n, err)
	}
	if sum, _ := s.UserSummary(b.Email); !sum.Account.Disabled || sum.LiveSessions != 0 {
		t.Fatalf("after disabling: %+v", sum)
	}
	if n, err := s.SetDisabled(b.Email, false); err != nil || n != 0 {
		t.Fatalf("enable: %d %v", n, err)
	}
	if err := s.SetQuota(a.Email, 50<<30); err != nil {
		t.Fatal(err)
	}
	if sum, _ := s.UserSummary(a.Email); sum.Account.QuotaBytes != 50<<30 {
		t.Fatalf("quota: %d", sum.Account.QuotaBytes)
	}
	if removed, revoked, err := s.ResetSecondFactor(b.Email); err != nil || removed || revoked != 0 {
		t.Fatalf("reset without a factor: %v %d %v", removed, revoked, err)
	}
	for _, op := range []func() error{
		func() error { _, err := s.SetDisabled("nobody@example.org", true); return err },
		func() error { return s.SetQuota("nobody@example.org", 1) },
		func() error { _, _, err := s.ResetSecondFactor("nobody@example.org"); return err },
		func() error { _, err := s.UserSummary("nobody@example.org"); return err },
	} {
		if err := op(); fault.ErrorCode(err) != fault.ECodeAccountNotFound {
			t.Fatalf("an unknown address: %v", err)
		}
	}
}

// TestLargestAccounts: the metrics' top accounts are the n holding the most
// bytes, largest first, ties by id; a blob two accounts hold counts for
// each, and an account holding nothing is not listed.
func TestLargestAccounts(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	mustAccount(t, s, c, 1) // holds nothing
	for i, size := range []int64{30, 10, 50, 30, 20} {
		id := fmt.Sprintf("acct-%c", 'a'+i)
		holdVia(t, s, id, "album-"+id, kv.Blob{Hash: hexHash(byte('a' + i)), Size: size})
	}
	holdVia(t, s, "acct-b", "album-b2", kv.Blob{Hash: hexHash('a'), Size: 30}) // acct-a's blob: acct-b now 40
	for _, tc := range []struct {
		n    int
		want []kv.AccountBytes
	}{
		{3, []kv.AccountBytes{{"acct-c", 50}, {"acct-b", 40}, {"acct-a", 30}}},
		{10, []kv.AccountBytes{{"acct-c", 50}, {"acct-b", 40}, {"acct-a", 30}, {"acct-d", 30}, {"acct-e", 20}}},
	} {
		got, err := s.LargestAccounts(tc.n)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Fatalf("LargestAccounts(%d): got %v %v, want %v", tc.n, got, err, tc.want)
		}
	}
}

// TestSetPassword: the operator's reset writes the new hash, closes every
// session and pending sign-in challenge of the account, and clears its
// lockout, leaving other accounts alone.
func TestSetPassword(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	a := mustAccount(t, s, c, 1)
	b := mustAccount(t, s, c, 2)
	if err := s.LoginSucceeded(a.Email, newSession(c, a.ID, "sess-1-1"), "at-1-1", "rt-1-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateMFAChallenge("sbx_mfa_1", a.ID, c.Now().Add(5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	p := kv.LockoutPolicy{Failures: 2, Window: 15 * time.Minute}
	for range 2 {
		if err := s.CountPasswordFailure(a.Email, p); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.PasswordAttempt(a.Email, p); fault.ErrorCode(err) != fault.ECodeAccountLocked {
		t.Fatalf("before the reset: %v, want locked", err)
	}
	revoked, err := s.SetPassword(a.Email, "new-hash")
	if err != nil || revoked != 2 {
		t.Fatalf("SetPassword: %d sessions closed, %v; want 2", revoked, err)
	}
	if acct, failures, err := s.PasswordAttempt(a.Email, p); err != nil || failures != 0 || acct.PasswordHash != "new-hash" {
		t.Fatalf("after the reset: %+v %d %v", acct, failures, err)
	}
	if got := sessionsOf(t, s, a.ID); len(got) != 0 {
		t.Fatalf("sessions after the reset: %d", len(got))
	}
	anyCode := func(string, []byte, time.Time) (uint64, bool, error) { return 0, true, nil }
	if err := s.VerifyLogin("sbx_mfa_1", kv.TOTPProof(anyCode), 5, newSession(c, "", "sess-1-2"), "at-1-2", "rt-1-2"); fault.ErrorCode(err) != fault.ECodeChallengeExpired {
		t.Fatalf("the pending sign-in after the reset: %v", err)
	}
	if got := sessionsOf(t, s, b.ID); len(got) != 1 {
		t.Fatalf("another account's sessions: %d", len(got))
	}
	if _, err := s.SetPassword("nobody@example.org", "h"); fault.ErrorCode(err) != fault.ECodeAccountNotFound {
		t.Fatalf("an unknown address: %v", err)
	}
}
