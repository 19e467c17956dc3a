package kv_test

import (
	"fmt"
	"testing"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/kv/kvtest"
)

// TestFeedPages: entries after a sync_seq, oldest first, a page at a time,
// with has_more; another account's album is refused.
func TestFeedPages(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	acct := mustAccount(t, s, c, 1)
	holdVia(t, s, acct.ID, "album", kv.Blob{Hash: hexHash('c'), Size: 10})
	for i := range 5 {
		_, err := s.ApplyOp(acct.ID, &kv.Op{
			AlbumID: "album", AssetID: fmt.Sprint("asset-", i), Action: kv.OpCreate, ProtocolVersion: "2026-09-01",
			CreatedByUser: acct.ID, CiphertextHash: hexHash('c'), Manifest: kv.Blob{Hash: fmt.Sprintf("%064x", i), Size: 100},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var seen []uint64
	after := uint64(0)
	for {
		entries, more, err := s.Feed(acct.ID, "album", after, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			seen = append(seen, e.SyncSeq)
		}
		if !more {
			break
		}
		after = entries[len(entries)-1].SyncSeq
	}
	if fmt.Sprint(seen) != "[1 2 3 4 5]" {
		t.Fatalf("paged feed: %v", seen)
	}
	if entries, more, err := s.Feed(acct.ID, "album", 5, 2); err != nil || more || len(entries) != 0 {
		t.Fatalf("after the last entry: %d %v %v", len(entries), more, err)
	}
	other := mustAccount(t, s, c, 2)
	if _, _, err := s.Feed(other.ID, "album", 0, 2); fault.ErrorCode(err) != fault.ECodeAlbumForbidden {
		t.Fatalf("another account's album: %v", err)
	}
}
