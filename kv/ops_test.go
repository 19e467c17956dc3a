package kv_test

import (
	"fmt"
	"sync"
	"testing"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/kv/kvtest"
)

// TestApplyOpBatchedRefusals: refused and applied ops share batches. A
// refusal must neither fail nor re-run its batch: every create applies once,
// exactly one replace of the head wins, and sync_seq stays contiguous.
func TestApplyOpBatchedRefusals(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	acct := mustAccount(t, s, c, 1)
	holdVia(t, s, acct.ID, "album", kv.Blob{Hash: hexHash('c'), Size: 10})
	op := func(asset, action, prior string, n int) *kv.Op {
		return &kv.Op{
			AlbumID: "album", AssetID: asset, Action: action, ProtocolVersion: "2026-09-01", CreatedByUser: acct.ID,
			PriorHash: prior, CiphertextHash: hexHash('c'), OriginalBlobHash: hexHash('c'),
			Manifest: kv.Blob{Hash: fmt.Sprintf("%064x", n), Size: 100},
		}
	}
	if _, err := s.ApplyOp(acct.ID, op("head", kv.OpCreate, "", 0)); err != nil {
		t.Fatal(err)
	}
	const n = 64
	results := make([]error, 2*n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, results[i] = s.ApplyOp(acct.ID, op("head", kv.OpReplace, fmt.Sprintf("%064x", 0), 1+i)) })
		wg.Go(func() { _, results[n+i] = s.ApplyOp(acct.ID, op(fmt.Sprint("asset-", i), kv.OpCreate, "", 1000+i)) })
	}
	wg.Wait()
	won := 0
	for i, err := range results {
		switch {
		case err == nil && i < n:
			won++
		case err == nil:
		case i < n && fault.ErrorCode(err) == fault.ECodeOpStaleChain:
		default:
			t.Fatalf("op %d: %v", i, err)
		}
	}
	if won != 1 {
		t.Fatalf("%d replaces of one head won", won)
	}
	entries, more, err := s.Feed(acct.ID, "album", 0, 1000)
	if err != nil || more || len(entries) != 2+n {
		t.Fatalf("feed: %d entries, more %v, %v", len(entries), more, err)
	}
	for i, e := range entries {
		if e.SyncSeq != uint64(i+1) {
			t.Fatalf("entry %d has sync_seq %d", i, e.SyncSeq)
		}
	}
	albums, _ := s.Albums(acct.ID)
	if albums[0].SyncSeq != 2+n {
		t.Fatalf("album sync_seq %d", albums[0].SyncSeq)
	}
}
