package kv_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/kv/kvtest"
)

// openTransferSession provisions an album for the account and opens an upload
// session on it named token.
func openTransferSession(tb testing.TB, s *kv.Store, accountID, albumID, token string) {
	tb.Helper()
	if _, _, err := s.ProvisionAlbum(accountID, albumID, "2026-09-01"); err != nil {
		tb.Fatal(err)
	}
	if _, err := s.OpenUpload(accountID, albumID, token, time.Hour, 0); err != nil {
		tb.Fatal(err)
	}
}

func wantCode(tb testing.TB, err error, code string) {
	tb.Helper()
	if got := fault.ErrorCode(err); got != code {
		tb.Fatalf("got %v, want %s", err, code)
	}
}

func removals(tb testing.TB, s *kv.Store) []string {
	tb.Helper()
	ids, err := s.TransferRemovals(100)
	if err != nil {
		tb.Fatal(err)
	}
	return ids
}

// writer holds the lease of the transfer id, as the server's writer of it
// does, and returns the fence its writes name.
func writer(tb testing.TB, s *kv.Store, id string) kv.Fence {
	tb.Helper()
	f := kv.Fence{Lease: "tus/" + id, Holder: "node/1"}
	if ok, err := s.TryLease(f.Lease, f.Holder, 24*time.Hour); err != nil || !ok {
		tb.Fatalf("the writer's lease: %v %v", ok, err)
	}
	return f
}

func TestTransferLifecycle(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	a := mustAccount(t, s, c, 1)
	const up = "sbx_up_transfers"
	openTransferSession(t, s, a.ID, "album", up)
	tr := &kv.Transfer{ID: "t-1", Hash: hexHash('d'), Length: 100}
	c.Advance(10 * time.Minute)
	if err := s.CreateTransfer(a.ID, up, tr, time.Hour, kv.TransferLimits{}); err != nil {
		t.Fatal(err)
	}
	if u, _ := s.Upload(a.ID, up); !u.ExpiresAt.Equal(c.Now().Add(time.Hour)) {
		t.Fatalf("creating a transfer did not move the session's expiry: %v", u.ExpiresAt)
	}
	got, err := s.Transfer(a.ID, up, "t-1")
	if err != nil || got.AccountID != a.ID || got.Hash != hexHash('d') || got.Length != 100 || got.Offset != 0 || got.HashState != nil || !got.CreatedAt.Equal(c.Now()) {
		t.Fatalf("Transfer = %+v, %v", got, err)
	}
	if ids, _ := s.Transfers("", 10); !slices.Equal(ids, []string{"t-1"}) {
		t.Fatalf("Transfers = %q", ids)
	}

	c.Advance(50 * time.Minute)
	w1 := writer(t, s, "t-1")
	if err := s.AdvanceTransfer(a.ID, up, "t-1", w1, 0, 60, []byte("state@60"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Transfer(a.ID, up, "t-1"); got.Offset != 60 || string(got.HashState) != "state@60" {
		t.Fatalf("after advance: %+v", got)
	}
	if u, _ := s.Upload(a.ID, up); !u.ExpiresAt.Equal(c.Now().Add(time.Hour)) {
		t.Fatalf("acknowledging bytes did not move the session's expiry: %v", u.ExpiresAt)
	}
	// A stale start offset, a step back and a step past the length are refused.
	wantCode(t, s.AdvanceTransfer(a.ID, up, "t-1", w1, 0, 70, nil, time.Hour), fault.ECodeOffsetMismatch)
	wantCode(t, s.AdvanceTransfer(a.ID, up, "t-1", w1, 60, 50, nil, time.Hour), fault.ECodeOffsetMismatch)
	wantCode(t, s.AdvanceTransfer(a.ID, up, "t-1", w1, 60, 101, nil, time.Hour), fault.ECodeOffsetMismatch)
	_, err = s.CompleteTransfer(a.ID, up, "t-1", w1, 0, time.Hour)
	wantCode(t, err, fault.ECodeOffsetMismatch)

	newlyHeld, err := s.CompleteTransfer(a.ID, up, "t-1", w1, 60, time.Hour)
	if err != nil || !newlyHeld {
		t.Fatalf("complete: %v, %v", newlyHeld, err)
	}
	if held, _ := s.Holds(a.ID, hexHash('d')); !held {
		t.Fatal("the completed blob is not held")
	}
	if n, _ := s.HeldBytes(a.ID); n != 100 {
		t.Fatalf("held bytes: %d", n)
	}
	if hashes, _ := s.UploadBlobs(a.ID, up); !slices.Equal(hashes, []string{hexHash('d')}) {
		t.Fatalf("the session's hash set: %q", hashes)
	}
	_, err = s.Transfer(a.ID, up, "t-1")
	wantCode(t, err, fault.ECodeTransferNotFound)
	if ids, _ := s.Transfers("", 10); len(ids) != 0 {
		t.Fatalf("Transfers after completion = %q", ids)
	}
	if got := removals(t, s); !slices.Equal(got, []string{"t-1"}) {
		t.Fatalf("removal queue = %q", got)
	}
	if err := s.ForgetTransferRemovals([]string{"t-1", "t-1"}); err != nil {
		t.Fatal(err)
	}
	if got := removals(t, s); len(got) != 0 {
		t.Fatalf("removal queue after forgetting = %q", got)
	}
}

func TestTransferRefusedOutsideItsSession(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	a, b := mustAccount(t, s, c, 1), mustAccount(t, s, c, 2)
	openTransferSession(t, s, a.ID, "album-a", "sbx_up_a1")
	if _, err := s.OpenUpload(a.ID, "album-a", "sbx_up_a2", time.Hour, 0); err != nil {
		t.Fatal(err)
	}
	openTransferSession(t, s, b.ID, "album-b", "sbx_up_b")
	if err := s.CreateTransfer(a.ID, "sbx_up_a1", &kv.Transfer{ID: "t-a", Hash: hexHash('e'), Length: 10}, time.Hour, kv.TransferLimits{}); err != nil {
		t.Fatal(err)
	}
	// Another account through its own session, another account naming the
	// owner's session, and the owner through another of its sessions.
	wa := writer(t, s, "t-a")
	for _, tc := range []struct{ account, upload, code string }{
		{b.ID, "sbx_up_b", fault.ECodeTransferNotFound},
		{b.ID, "sbx_up_a1", fault.ECodeUploadNotFound},
		{a.ID, "sbx_up_a2", fault.ECodeTransferNotFound},
	} {
		_, err := s.Transfer(tc.account, tc.upload, "t-a")
		wantCode(t, err, tc.code)
		wantCode(t, s.AdvanceTransfer(tc.account, tc.upload, "t-a", wa, 0, 1, nil, time.Hour), tc.code)
		wantCode(t, s.DiscardTransfer(tc.account, tc.upload, "t-a"), tc.code)
		_, err = s.CompleteTransfer(tc.account, tc.upload, "t-a", wa, 0, time.Hour)
		wantCode(t, err, tc.code)
	}
	_, err := s.Transfer(a.ID, "sbx_up_a1", "no-such-transfer")
	wantCode(t, err, fault.ECodeTransferNotFound)
	wantCode(t, s.CreateTransfer(b.ID, "sbx_up_a1", &kv.Transfer{ID: "t-b", Hash: hexHash('e'), Length: 10}, time.Hour, kv.TransferLimits{}), fault.ECodeUploadNotFound)

	if err := s.DiscardTransfer(a.ID, "sbx_up_a1", "t-a"); err != nil {
		t.Fatal(err)
	}
	_, err = s.Transfer(a.ID, "sbx_up_a1", "t-a")
	wantCode(t, err, fault.ECodeTransferNotFound)
	if got := removals(t, s); !slices.Equal(got, []string{"t-a"}) {
		t.Fatalf("removal queue = %q", got)
	}
	if held, _ := s.Holds(a.ID, hexHash('e')); held {
		t.Fatal("a discarded transfer's blob is held")
	}
}

func TestTransferQuota(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	a := mustAccount(t, s, c, 1)
	const up = "sbx_up_quota"
	openTransferSession(t, s, a.ID, "album", up)
	if _, err := s.AddUploadBlob(a.ID, up, kv.Blob{Hash: hexHash('a'), Size: 300}, time.Hour); err != nil {
		t.Fatal(err)
	}
	// Unlimited (0): anything goes.
	if err := s.CreateTransfer(a.ID, up, &kv.Transfer{ID: "t-big", Hash: hexHash('b'), Length: 1 << 40}, time.Hour, kv.TransferLimits{}); err != nil {
		t.Fatal(err)
	}
	if err := s.DiscardTransfer(a.ID, up, "t-big"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetQuota(a.Email, 1000); err != nil {
		t.Fatal(err)
	}
	// 300 held + 400 open: 700 of 1000.
	if err := s.CreateTransfer(a.ID, up, &kv.Transfer{ID: "t-1", Hash: hexHash('b'), Length: 400}, time.Hour, kv.TransferLimits{}); err != nil {
		t.Fatal(err)
	}
	// The open transfer counts whole even before a byte of it arrived.
	wantCode(t, s.CreateTransfer(a.ID, up, &kv.Transfer{ID: "t-2", Hash: hexHash('c'), Length: 301}, time.Hour, kv.TransferLimits{}), fault.ECodeQuotaExceeded)
	if _, err := s.Transfer(a.ID, up, "t-2"); fault.ErrorCode(err) != fault.ECodeTransferNotFound {
		t.Fatalf("a refused transfer was recorded: %v", err)
	}
	if err := s.CreateTransfer(a.ID, up, &kv.Transfer{ID: "t-3", Hash: hexHash('c'), Length: 300}, time.Hour, kv.TransferLimits{}); err != nil {
		t.Fatalf("exactly the quota: %v", err)
	}
	// Discarding a transfer frees its share.
	if err := s.DiscardTransfer(a.ID, up, "t-3"); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTransfer(a.ID, up, &kv.Transfer{ID: "t-4", Hash: hexHash('c'), Length: 300}, time.Hour, kv.TransferLimits{}); err != nil {
		t.Fatal(err)
	}
}

func TestTransfersEndWithTheirSession(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	a := mustAccount(t, s, c, 1)
	openTransferSession(t, s, a.ID, "album", "sbx_up_closed")
	if _, err := s.OpenUpload(a.ID, "album", "sbx_up_expiring", time.Hour, 0); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ id, up string }{{"t-c1", "sbx_up_closed"}, {"t-c2", "sbx_up_closed"}, {"t-e", "sbx_up_expiring"}} {
		if err := s.CreateTransfer(a.ID, tc.up, &kv.Transfer{ID: tc.id, Hash: hexHash('f'), Length: 10}, time.Hour, kv.TransferLimits{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CloseUpload(a.ID, "sbx_up_closed"); err != nil {
		t.Fatal(err)
	}
	if got := removals(t, s); !slices.Equal(got, []string{"t-c1", "t-c2"}) {
		t.Fatalf("removal queue after close = %q", got)
	}
	// The expiring session stays open while it is written to.
	c.Advance(59 * time.Minute)
	if err := s.AdvanceTransfer(a.ID, "sbx_up_expiring", "t-e", writer(t, s, "t-e"), 0, 5, []byte("s"), time.Hour); err != nil {
		t.Fatal(err)
	}
	c.Advance(59 * time.Minute)
	if n, _ := s.InFlight("album"); n != 1 {
		t.Fatalf("in flight with a transfer written a minute ago: %d", n)
	}
	c.Advance(time.Minute)
	if n, _ := s.InFlight("album"); n != 0 {
		t.Fatalf("in flight after an idle hour: %d", n)
	}
	// Expired but not yet swept: already refused.
	_, err := s.Transfer(a.ID, "sbx_up_expiring", "t-e")
	wantCode(t, err, fault.ECodeUploadNotFound)
	if _, err := s.Sweep(); err != nil {
		t.Fatal(err)
	}
	if got := removals(t, s); !slices.Equal(got, []string{"t-c1", "t-c2", "t-e"}) {
		t.Fatalf("removal queue after the sweep = %q", got)
	}
	if ids, _ := s.Transfers("", 10); len(ids) != 0 {
		t.Fatalf("Transfers = %q", ids)
	}
	// The quota share of swept transfers is gone too.
	if err := s.SetQuota(a.Email, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OpenUpload(a.ID, "album", "sbx_up_new", time.Hour, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTransfer(a.ID, "sbx_up_new", &kv.Transfer{ID: "t-n", Hash: hexHash('f'), Length: 10}, time.Hour, kv.TransferLimits{}); err != nil {
		t.Fatal(err)
	}
}

func TestTransfersPaging(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	a := mustAccount(t, s, c, 1)
	openTransferSession(t, s, a.ID, "album", "sbx_up_paging")
	for _, id := range []string{"t-3", "t-1", "t-2"} {
		if err := s.CreateTransfer(a.ID, "sbx_up_paging", &kv.Transfer{ID: id, Hash: hexHash('a'), Length: 1}, time.Hour, kv.TransferLimits{}); err != nil {
			t.Fatal(err)
		}
	}
	first, _ := s.Transfers("", 2)
	rest, _ := s.Transfers(first[len(first)-1], 2)
	if !slices.Equal(first, []string{"t-1", "t-2"}) || !slices.Equal(rest, []string{"t-3"}) {
		t.Fatalf("pages %q, %q", first, rest)
	}
}

// TestTransferWritesAreFenced: a writer whose lease on the transfer lapsed
// (its node stalled past the ttl) and was taken by another node can neither
// advance the offset nor complete the transfer: the store refuses it in the
// transaction that would write, with the new holder's remaining time as
// Retry-After, and the new holder writes from the offset left as it was.
// A lapsed lease no one took is refused the same way.
func TestTransferWritesAreFenced(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	a := mustAccount(t, s, c, 1)
	const up = "sbx_up_fenced"
	openTransferSession(t, s, a.ID, "album", up)
	if err := s.CreateTransfer(a.ID, up, &kv.Transfer{ID: "t-f", Hash: hexHash('f'), Length: 100}, time.Hour, kv.TransferLimits{}); err != nil {
		t.Fatal(err)
	}
	const ttl = 30 * time.Second
	stale := kv.Fence{Lease: "tus/t-f", Holder: "node-a/1"}
	if ok, err := s.TryLease(stale.Lease, stale.Holder, ttl); err != nil || !ok {
		t.Fatalf("node a's lease: %v %v", ok, err)
	}
	if err := s.AdvanceTransfer(a.ID, up, "t-f", stale, 0, 10, []byte("a@10"), time.Hour); err != nil {
		t.Fatal(err)
	}
	c.Advance(ttl)
	wantLocked := func(err error, retry time.Duration) {
		t.Helper()
		var f *fault.Error
		if !errors.As(err, &f) || f.Code != fault.ECodeTransferLocked || f.RetryAfter != retry {
			t.Fatalf("a write under a lost lease: %v, want %s with Retry-After %v", err, fault.ECodeTransferLocked, retry)
		}
	}
	wantLocked(s.AdvanceTransfer(a.ID, up, "t-f", stale, 10, 20, []byte("a@20"), time.Hour), time.Second)
	taker := kv.Fence{Lease: "tus/t-f", Holder: "node-b/1"}
	if ok, err := s.TryLease(taker.Lease, taker.Holder, ttl); err != nil || !ok {
		t.Fatalf("node b's lease: %v %v", ok, err)
	}
	c.Advance(10 * time.Second)
	wantLocked(s.AdvanceTransfer(a.ID, up, "t-f", stale, 10, 20, []byte("a@20"), time.Hour), 20*time.Second)
	_, err := s.CompleteTransfer(a.ID, up, "t-f", stale, 10, time.Hour)
	wantLocked(err, 20*time.Second)
	if got, err := s.Transfer(a.ID, up, "t-f"); err != nil || got.Offset != 10 || string(got.HashState) != "a@10" {
		t.Fatalf("after the refused writes: %+v (%v), want offset 10", got, err)
	}
	if err := s.AdvanceTransfer(a.ID, up, "t-f", taker, 10, 100, []byte("b@100"), time.Hour); err != nil {
		t.Fatalf("the new holder: %v", err)
	}
	if _, err := s.CompleteTransfer(a.ID, up, "t-f", taker, 100, time.Hour); err != nil {
		t.Fatalf("the new holder completes: %v", err)
	}
}
