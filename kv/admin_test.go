package kv_test

import (
	"fmt"
	"slices"
	"testing"

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
