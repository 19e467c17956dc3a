package kv_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/kv/kvtest"
)

// wantLimit fails unless err is the refusal of the limit named by flag,
// with code and a wait of retryAfter.
func wantLimit(tb testing.TB, err error, code, flag string, retryAfter time.Duration) {
	tb.Helper()
	var fe *fault.Error
	if !errors.As(err, &fe) || fe.Code != code || fe.Limit != flag || fe.RetryAfter != retryAfter {
		tb.Fatalf("got %#v, want %s (limit %s, retry after %s)", err, code, flag, retryAfter)
	}
}

// TestUploadSessionCap: an account opens at most maxOpen sessions; the
// refusal names the wait until its first session expires, an expired
// session (not yet swept) or a closed one frees its place, and another
// account is not affected.
func TestUploadSessionCap(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	a, b := mustAccount(t, s, c, 1), mustAccount(t, s, c, 2)
	for _, acct := range []*kv.Account{a, b} {
		if _, _, err := s.ProvisionAlbum(acct.ID, "album-"+acct.ID, "2026-09-01"); err != nil {
			t.Fatal(err)
		}
	}
	open := func(acct *kv.Account, token string) error {
		_, err := s.OpenUpload(acct.ID, "album-"+acct.ID, token, time.Hour, 3)
		return err
	}
	for i := range 3 {
		if err := open(a, fmt.Sprintf("sbx_up_%d", i)); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Minute)
	}
	wantLimit(t, open(a, "sbx_up_3"), fault.ECodeLimitUploadSessions, "max-upload-sessions", 57*time.Minute)
	if err := open(b, "sbx_up_b"); err != nil {
		t.Fatalf("another account's session: %v", err)
	}
	if err := s.CloseUpload(a.ID, "sbx_up_1"); err != nil {
		t.Fatal(err)
	}
	if err := open(a, "sbx_up_4"); err != nil {
		t.Fatalf("after a close: %v", err)
	}
	wantLimit(t, open(a, "sbx_up_5"), fault.ECodeLimitUploadSessions, "max-upload-sessions", 57*time.Minute)
	c.Advance(57 * time.Minute) // sbx_up_0 expires; no sweep ran
	if err := open(a, "sbx_up_5"); err != nil {
		t.Fatalf("after an expiry: %v", err)
	}
}

// TestUploadSessionCapHoldsUnderConcurrency: parallel openings, each in its
// own transaction, never pass the cap together.
func TestUploadSessionCapHoldsUnderConcurrency(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	a := mustAccount(t, s, c, 1)
	if _, _, err := s.ProvisionAlbum(a.ID, "album", "2026-09-01"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Go(func() { _, errs[i] = s.OpenUpload(a.ID, "album", fmt.Sprintf("sbx_up_%d", i), time.Hour, 5) })
	}
	wg.Wait()
	opened := 0
	for _, err := range errs {
		if err == nil {
			opened++
		} else if fault.ErrorCode(err) != fault.ECodeLimitUploadSessions {
			t.Fatal(err)
		}
	}
	if opened != 5 {
		t.Fatalf("%d sessions opened, want the cap of 5", opened)
	}
}

// TestTransferCaps: an account holds at most MaxOpen open transfers and
// MaxPendingBytes of declared lengths across all its sessions, with no
// quota set; a finished or discarded transfer frees its share.
func TestTransferCaps(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	a := mustAccount(t, s, c, 1)
	openTransferSession(t, s, a.ID, "album-1", "sbx_up_1")
	openTransferSession(t, s, a.ID, "album-2", "sbx_up_2")
	lim := kv.TransferLimits{MaxOpen: 2, MaxPendingBytes: 1000}
	create := func(up, id string, length int64) error {
		return s.CreateTransfer(a.ID, up, &kv.Transfer{ID: id, Hash: hexHash('a'), Length: length}, time.Hour, lim)
	}
	if err := create("sbx_up_1", "t-1", 600); err != nil {
		t.Fatal(err)
	}
	wantLimit(t, create("sbx_up_2", "t-2", 401), fault.ECodeLimitPendingBytes, "max-pending-bytes", time.Hour)
	if err := create("sbx_up_2", "t-2", 400); err != nil {
		t.Fatal(err)
	}
	wantLimit(t, create("sbx_up_1", "t-3", 1), fault.ECodeLimitTransfers, "max-transfers", time.Hour)
	if err := s.DiscardTransfer(a.ID, "sbx_up_1", "t-1"); err != nil {
		t.Fatal(err)
	}
	if err := create("sbx_up_1", "t-3", 600); err != nil {
		t.Fatalf("after a discard: %v", err)
	}
	if _, err := s.Transfer(a.ID, "sbx_up_1", "t-1"); fault.ErrorCode(err) != fault.ECodeTransferNotFound {
		t.Fatalf("the discarded transfer: %v", err)
	}
}
