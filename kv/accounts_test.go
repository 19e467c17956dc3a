package kv_test

import (
	"strings"
	"testing"
	"time"

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

// TestDeleteAccount: deleting an account removes what is its own in one
// step and releases its holdings: a blob another account holds stays, one
// only it held is no longer recorded (for gc), the totals and the other
// account's usage stay right; the log gains the deletion's record; the
// email may register again.
func TestDeleteAccount(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	shared, own, inline := kv.Blob{Hash: hexHash('a'), Size: 100}, kv.Blob{Hash: hexHash('b'), Size: 200}, kv.Blob{Hash: hexHash('c'), Size: 3, Data: []byte("abc")}
	holdVia(t, s, "acct-x", "album-x", shared) // acct-x@example.org, the one deleted
	holdVia(t, s, "acct-x", "album-x2", own)
	holdVia(t, s, "acct-x", "album-x2", inline)
	holdVia(t, s, "acct-y", "album-y", shared)
	x, err := s.AccountByEmail("acct-x@example.org")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.LoginSucceeded(x.Email, newSession(c, x.ID, "sess-x"), "at-x", "rt-x"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.PutEscrow(x.ID, []byte("escrow")); err != nil {
		t.Fatal(err)
	}
	if err := s.PublishDirectory(x.ID, &kv.Directory{Version: 3, Bytes: []byte("d"), IdentityKey: []byte("k")}, kv.PublishLimit{}); err != nil {
		t.Fatal(err)
	}
	link := strings.Repeat("1", 32)
	if err := s.CreateShare(link, &kv.Share{AccountID: x.ID, MetadataHash: own.Hash, Serves: []string{own.Hash}}, kv.ShareLimits{}); err != nil {
		t.Fatal(err)
	}
	if err := s.IssueEnrollmentCode(x.ID, "sbx_en_x", "123456789012", c.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RedeemEnrollmentCode("sbx_en_x", false, func([]byte) string { return "sbx_rl_x" }, c.Now().Add(time.Hour), kv.RelayLimits{}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateInvite(kv.Invite{ID: "inv-x", Email: x.Email, ExpiresAt: c.Now().Add(time.Hour)}, "sbx_in_x"); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateInvite(kv.Invite{ID: "inv-other", Email: "z@example.org", ExpiresAt: c.Now().Add(time.Hour)}, "sbx_in_z"); err != nil {
		t.Fatal(err)
	}
	before, err := s.LogTree()
	if err != nil {
		t.Fatal(err)
	}

	d, err := s.DeleteAccount(x.Email)
	if err != nil || d.AccountID != x.ID || d.RevokedSessions != 1 || d.UnheldBlobs != 2 || d.LogIndex != before.N {
		t.Fatalf("DeleteAccount: %+v %v (log had %d records)", d, err, before.N)
	}
	if _, err := s.AccountByEmail(x.Email); fault.ErrorCode(err) != fault.ECodeAccountNotFound {
		t.Fatalf("the account after its deletion: %v", err)
	}
	if _, err := s.Account(x.ID); fault.ErrorCode(err) != fault.ECodeAccountNotFound {
		t.Fatalf("the account by id after its deletion: %v", err)
	}
	if _, err := s.Authenticate("at-x"); fault.ErrorCode(err) != fault.ECodeUnauthenticated {
		t.Fatalf("a session after the deletion: %v", err)
	}
	if _, err := s.Escrow(x.ID); fault.ErrorCode(err) != fault.ECodeEscrowNotFound {
		t.Fatalf("the escrow after the deletion: %v", err)
	}
	if _, err := s.Directory(x.ID); fault.ErrorCode(err) != fault.ECodeDirectoryNotFound {
		t.Fatalf("the directory after the deletion: %v", err)
	}
	if _, err := s.Share(link); err != kv.ErrShareNotFound {
		t.Fatalf("the link after the deletion: %v", err)
	}
	zs := kv.Blob{Hash: hexHash('d'), Size: 1}
	holdVia(t, s, "acct-z", "album-z", zs)
	if err := s.CreateShare(link, &kv.Share{AccountID: "acct-z", MetadataHash: zs.Hash, Serves: []string{zs.Hash}}, kv.ShareLimits{}); fault.ErrorCode(err) != fault.ECodeShareIDTaken {
		t.Fatalf("the deleted link's id handed out again: %v, want %s", err, fault.ECodeShareIDTaken)
	}
	if err := s.AppendRelay("sbx_rl_x", kv.ToInitiator, []byte("p"), kv.RelayLimits{}); fault.ErrorCode(err) != fault.ECodeRelayChannelNotFound {
		t.Fatalf("the relay channel after the deletion: %v", err)
	}
	if albums, err := s.Albums(x.ID); err != nil || len(albums) != 0 {
		t.Fatalf("albums after the deletion: %v %v", albums, err)
	}
	if list, err := s.Invites(); err != nil || len(list) != 1 || list[0].ID != "inv-other" {
		t.Fatalf("invitations after the deletion: %+v %v", list, err)
	}
	blobs, err := s.Blobs("", 10)
	if err != nil || len(blobs) != 2 || blobs[0].Hash != shared.Hash || blobs[1].Hash != hexHash('d') {
		t.Fatalf("recorded blobs after the deletion: %+v %v", blobs, err)
	}
	if count, size, err := s.BlobTotals(); err != nil || count != 2 || size != 101 {
		t.Fatalf("blob totals: %d %d %v", count, size, err)
	}
	if held, err := s.HeldBytes("acct-y"); err != nil || held != 100 {
		t.Fatalf("the other account's usage: %d %v", held, err)
	}
	if problems, err := s.UsageProblems(10); err != nil || len(problems) != 0 {
		t.Fatalf("usage problems: %v %v", problems, err)
	}
	if data, err := s.InlineBlob(inline.Hash); err != nil || data != nil {
		t.Fatalf("the inline blob nobody holds is still kept: %q %v", data, err)
	}
	if after, err := s.LogTree(); err != nil || after.N != before.N+1 {
		t.Fatalf("the log after the deletion: %d records, want %d (%v)", after.N, before.N+1, err)
	}
	if _, err := s.DeleteAccount(x.Email); fault.ErrorCode(err) != fault.ECodeAccountNotFound {
		t.Fatalf("deleting twice: %v", err)
	}
	again := &kv.Account{ID: "acct-x2", Email: x.Email, CreatedAt: c.Now()}
	if err := s.CreateAccount(again, newSession(c, again.ID, "sess-x2"), "at-x2", "rt-x2"); err != nil {
		t.Fatalf("registering the email again: %v", err)
	}
	if held, err := s.HeldBytes(again.ID); err != nil || held != 0 {
		t.Fatalf("the new account's usage: %d %v", held, err)
	}
}
