package kv_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/kv/kvtest"
)

// TestTrash: a tombstone ends an asset's chain and puts it in the trash;
// ops on it are refused until its owner restores it; at its purge the
// blobs its chain named that no other asset names are released (quota
// back, no longer recorded, a link's read of them 404), the others stay.
func TestTrash(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	acct := mustAccount(t, s, c, 1)
	shared, own := kv.Blob{Hash: hexHash('c'), Size: 10}, kv.Blob{Hash: hexHash('d'), Size: 20}
	holdVia(t, s, acct.ID, "album", shared)
	holdVia(t, s, acct.ID, "album", own)
	manifest := func(n int) kv.Blob { return kv.Blob{Hash: fmt.Sprintf("%064x", n), Size: 100} }
	apply := func(asset, action, prior string, ciphertext kv.Blob, n int) error {
		_, err := s.ApplyOp(acct.ID, &kv.Op{
			AlbumID: "album", AssetID: asset, Action: action, ProtocolVersion: "2026-09-01", CreatedByUser: acct.ID,
			PriorHash: prior, CiphertextHash: ciphertext.Hash, OriginalBlobHash: ciphertext.Hash, Manifest: manifest(n),
		})
		return err
	}
	for i, a := range []struct {
		asset string
		blob  kv.Blob
	}{{"a1", shared}, {"a2", shared}, {"a3", own}} {
		if err := apply(a.asset, kv.OpCreate, "", a.blob, i+1); err != nil {
			t.Fatal(err)
		}
	}
	link := strings.Repeat("2", 32)
	if err := s.CreateShare(link, &kv.Share{AccountID: acct.ID, MetadataHash: own.Hash, Serves: []string{own.Hash, shared.Hash}}); err != nil {
		t.Fatal(err)
	}
	tomb := func(asset, prior string, n int) (*kv.OpResult, error) {
		return s.ApplyTombstone(acct.ID, &kv.Tombstone{AlbumID: "album", AssetID: asset, ProtocolVersion: "2026-09-01",
			CreatedByUser: acct.ID, PriorHash: prior, Manifest: manifest(n)}, c.Now().Add(30*24*time.Hour))
	}
	res, err := tomb("a1", manifest(1).Hash, 11)
	if err != nil || res.Action != kv.ActionDelete || res.SyncSeq != 4 || res.Replayed {
		t.Fatalf("the tombstone: %+v %v", res, err)
	}
	if res, err := tomb("a1", manifest(1).Hash, 11); err != nil || !res.Replayed || res.SyncSeq != 4 {
		t.Fatalf("the tombstone again: %+v %v", res, err)
	}
	for name, err := range map[string]error{
		"a replace of the tombstone": apply("a1", kv.OpReplace, manifest(11).Hash, shared, 12),
		"a second tombstone":         func() error { _, err := tomb("a1", manifest(11).Hash, 13); return err }(),
	} {
		if fault.ErrorCode(err) != fault.ECodeAssetDeleted {
			t.Errorf("%s: %v, want %s", name, err, fault.ECodeAssetDeleted)
		}
	}
	for name, err := range map[string]error{
		"a tombstone of another head": func() error { _, err := tomb("a2", manifest(9).Hash, 14); return err }(),
		"a tombstone of no asset":     func() error { _, err := tomb("a9", manifest(9).Hash, 15); return err }(),
	} {
		if fault.ErrorCode(err) != fault.ECodeOpStaleChain {
			t.Errorf("%s: %v, want %s", name, err, fault.ECodeOpStaleChain)
		}
	}
	entries, _, err := s.Feed(acct.ID, "album", 3, 10)
	if err != nil || len(entries) != 1 || entries[0].Action != kv.ActionDelete || entries[0].ManifestHash != manifest(11).Hash || entries[0].CiphertextHash != shared.Hash {
		t.Fatalf("the feed after the tombstone: %+v %v", entries, err)
	}
	if res, err := s.RestoreAsset(acct.ID, "album", "a1"); err != nil || res.Action != kv.ActionRestore || res.SyncSeq != 5 {
		t.Fatalf("restore: %+v %v", res, err)
	}
	assets, _, _, err := s.Assets(acct.ID, "album", "", 10)
	if err != nil || len(assets) != 3 || assets[0].ManifestHash != manifest(1).Hash || assets[0].Action != kv.OpCreate {
		t.Fatalf("assets after the restore: %+v %v", assets, err)
	}
	if _, err := s.RestoreAsset(acct.ID, "album", "a1"); fault.ErrorCode(err) != fault.ECodeAssetNotInTrash {
		t.Fatalf("restoring a live asset: %v", err)
	}
	if _, err := tomb("a1", manifest(1).Hash, 16); err != nil {
		t.Fatal(err)
	}
	if _, err := tomb("a3", manifest(3).Hash, 17); err != nil {
		t.Fatal(err)
	}
	used, err := s.HeldBytes(acct.ID)
	if err != nil {
		t.Fatal(err)
	}
	c.Advance(30*24*time.Hour - time.Second)
	if _, err := s.Sweep(); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.HeldBytes(acct.ID); n != used {
		t.Fatalf("released before the purge: %d bytes held, want %d", n, used)
	}
	c.Advance(time.Hour)
	if _, err := s.Sweep(); err != nil {
		t.Fatal(err)
	}
	// a1's and a3's manifests and a3's blob are released; the shared blob,
	// which a2 names, and the tombstones stay.
	if n, err := s.HeldBytes(acct.ID); err != nil || n != used-100-100-20 {
		t.Fatalf("held after the purge: %d, want %d (%v)", n, used-220, err)
	}
	for hash, want := range map[string]bool{shared.Hash: true, own.Hash: false, manifest(1).Hash: false, manifest(2).Hash: true, manifest(3).Hash: false, manifest(16).Hash: true, manifest(17).Hash: true} {
		if held, err := s.Holds(acct.ID, hash); err != nil || held != want {
			t.Errorf("holds %s…: %v, want %v (%v)", hash[:6], held, want, err)
		}
	}
	if recorded, err := s.BlobsRecorded([]string{own.Hash}); err != nil || recorded[own.Hash] {
		t.Fatalf("the released blob is still recorded: %v", err)
	}
	if _, err := s.ShareBlob(link, own.Hash); err != kv.ErrShareNotFound {
		t.Fatalf("a link's read of a purged blob: %v", err)
	}
	if _, err := s.ShareBlob(link, shared.Hash); err != nil {
		t.Fatalf("a link's read of a blob still held: %v", err)
	}
	if _, err := s.RestoreAsset(acct.ID, "album", "a3"); fault.ErrorCode(err) != fault.ECodeAssetNotInTrash {
		t.Fatalf("restoring a purged asset: %v", err)
	}
	if err := apply("a3", kv.OpCreate, "", shared, 18); fault.ErrorCode(err) != fault.ECodeOpStaleChain {
		t.Fatalf("a create on a purged asset's id: %v", err)
	}
	if problems, err := s.UsageProblems(10); err != nil || len(problems) != 0 {
		t.Fatalf("usage problems: %v %v", problems, err)
	}
}
