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

// TestApplyOpReadsInOneExchange: on an engine whose reads each cost an
// exchange with its database (PostgreSQL), an op reads everything it
// checks in one: a create, a replace and a replay each cost one read (the
// replay a second, for the entry it answers from), so opReads has not
// drifted from the reads it stands for. Under a quota the account's open
// transfers are scanned once more, however many blobs the op stores.
// bbolt reads its own file and reports no exchanges.
func TestApplyOpReadsInOneExchange(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	if _, ok := s.EngineStats(); !ok {
		t.Skip("this engine's reads cost no exchange (the PostgreSQL suite runs it)")
	}
	acct := mustAccount(t, s, c, 1)
	holdVia(t, s, acct.ID, "album", kv.Blob{Hash: hexHash('c'), Size: 10})
	metadata := kv.Blob{Hash: hexHash('d'), Size: 3, Data: []byte("md!")}
	create := &kv.Op{
		AlbumID: "album", AssetID: "asset", Action: kv.OpCreate, ProtocolVersion: "2026-09-01", CreatedByUser: acct.ID,
		CiphertextHash: hexHash('c'), Manifest: kv.Blob{Hash: hexHash('e'), Size: 4, Data: []byte("man!")},
		Metadata: &metadata, MetadataBlobHash: metadata.Hash,
	}
	replace := *create
	replace.Action, replace.PriorHash, replace.OriginalBlobHash = kv.OpReplace, create.Manifest.Hash, hexHash('c')
	replace.Manifest = kv.Blob{Hash: hexHash('f'), Size: 4, Data: []byte("new!")}
	// In the retry test mode (TestMain) every update runs twice, and so
	// does every read in it.
	runs := uint64(1)
	if rerunMode {
		runs = 2
	}
	underQuota := *create
	underQuota.AssetID = "asset-under-quota"
	underQuota.Manifest = kv.Blob{Hash: hexHash('a'), Size: 4, Data: []byte("quo!")}
	metadata2 := kv.Blob{Hash: hexHash('b'), Size: 3, Data: []byte("md2")}
	underQuota.Metadata, underQuota.MetadataBlobHash = &metadata2, metadata2.Hash
	for _, tc := range []struct {
		name  string
		op    *kv.Op
		reads uint64
	}{{"create", create, 1}, {"replace", &replace, 1}, {"replay", create, 2}, {"create under a quota", &underQuota, 2}} {
		if tc.op == &underQuota {
			if err := s.SetQuota(acct.Email, 1<<30); err != nil {
				t.Fatal(err)
			}
		}
		before, _ := s.EngineStats()
		if _, err := s.ApplyOp(acct.ID, tc.op); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		after, _ := s.EngineStats()
		if reads := after.Reads - before.Reads; reads != tc.reads*runs {
			t.Errorf("%s: %d reads in %d runs, want %d a run", tc.name, reads, runs, tc.reads)
		}
	}
}
