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
	if err := s.CreateShare(link, &kv.Share{AccountID: acct.ID, MetadataHash: own.Hash, Serves: []string{own.Hash, shared.Hash}}, kv.ShareLimits{}); err != nil {
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

// TestDeleteAlbum: an album's tombstone deletes every live asset of it in
// one act (a delete entry each) and closes the album to ops and uploads;
// its id stays taken; its restore brings back the assets it deleted, not
// one deleted before it; after the purge the album stays deleted.
func TestDeleteAlbum(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	acct := mustAccount(t, s, c, 1)
	ciphertext := kv.Blob{Hash: hexHash('c'), Size: 10}
	holdVia(t, s, acct.ID, "album", ciphertext)
	manifest := func(n int) kv.Blob { return kv.Blob{Hash: fmt.Sprintf("%064x", n), Size: 100} }
	op := func(asset string, n int) *kv.Op {
		return &kv.Op{AlbumID: "album", AssetID: asset, Action: kv.OpCreate, ProtocolVersion: "2026-09-01", CreatedByUser: acct.ID,
			CiphertextHash: ciphertext.Hash, Manifest: manifest(n)}
	}
	for i, asset := range []string{"a1", "a2", "a3"} {
		if _, err := s.ApplyOp(acct.ID, op(asset, i+1)); err != nil {
			t.Fatal(err)
		}
	}
	purge := c.Now().Add(30 * 24 * time.Hour)
	if _, err := s.ApplyTombstone(acct.ID, &kv.Tombstone{AlbumID: "album", AssetID: "a3", ProtocolVersion: "2026-09-01",
		CreatedByUser: acct.ID, PriorHash: manifest(3).Hash, Manifest: manifest(30)}, purge); err != nil {
		t.Fatal(err)
	}
	tomb := &kv.AlbumTombstone{AlbumID: "album", ProtocolVersion: "2026-09-01", CreatedByUser: acct.ID, Manifest: manifest(99)}
	res, err := s.DeleteAlbum(acct.ID, tomb, purge)
	if err != nil || res.Assets != 2 || res.SyncSeq != 6 || res.Replayed {
		t.Fatalf("DeleteAlbum: %+v %v", res, err)
	}
	if res, err := s.DeleteAlbum(acct.ID, tomb, purge); err != nil || !res.Replayed || res.SyncSeq != 6 {
		t.Fatalf("DeleteAlbum again: %+v %v", res, err)
	}
	other := *tomb
	other.Manifest = manifest(98)
	if _, err := s.DeleteAlbum(acct.ID, &other, purge); fault.ErrorCode(err) != fault.ECodeAlbumDeleted {
		t.Fatalf("another tombstone of the deleted album: %v", err)
	}
	entries, _, err := s.Feed(acct.ID, "album", 4, 10)
	if err != nil || len(entries) != 2 || entries[0].Action != kv.ActionDelete || entries[0].AssetID != "a1" || entries[1].ManifestHash != manifest(99).Hash {
		t.Fatalf("the album's delete entries: %+v %v", entries, err)
	}
	assets, _, _, err := s.Assets(acct.ID, "album", "", 10)
	if err != nil || len(assets) != 3 || assets[0].Action != kv.ActionDelete || assets[0].SyncSeq != 5 || assets[2].SyncSeq != 4 {
		t.Fatalf("the assets of the deleted album: %+v %v", assets, err)
	}
	for name, err := range map[string]error{
		"an op":     func() error { _, err := s.ApplyOp(acct.ID, op("a4", 4)); return err }(),
		"an upload": func() error { _, err := s.OpenUpload(acct.ID, "album", "sbx_up_x", time.Hour, 0); return err }(),
		"a restore": func() error { _, err := s.RestoreAsset(acct.ID, "album", "a1"); return err }(),
	} {
		if fault.ErrorCode(err) != fault.ECodeAlbumDeleted {
			t.Errorf("%s in the deleted album: %v", name, err)
		}
	}
	if _, _, err := s.ProvisionAlbum("acct-other", "album", "2026-09-01"); fault.ErrorCode(err) != fault.ECodeAlbumForbidden {
		t.Fatalf("the deleted album's id for another account: %v", err)
	}
	res, err = s.RestoreAlbum(acct.ID, "album")
	if err != nil || res.Assets != 2 || res.SyncSeq != 8 {
		t.Fatalf("RestoreAlbum: %+v %v", res, err)
	}
	assets, _, _, err = s.Assets(acct.ID, "album", "", 10)
	if err != nil || assets[0].Action != kv.OpCreate || assets[1].Action != kv.OpCreate || assets[2].Action != kv.ActionDelete {
		t.Fatalf("the assets after the restore: %+v %v", assets, err)
	}
	if _, err := s.RestoreAlbum(acct.ID, "album"); fault.ErrorCode(err) != fault.ECodeAlbumNotInTrash {
		t.Fatalf("restoring a live album: %v", err)
	}
	if _, err := s.ApplyOp(acct.ID, op("a4", 4)); err != nil {
		t.Fatalf("an op after the restore: %v", err)
	}
	other.Manifest = manifest(97)
	if _, err := s.DeleteAlbum(acct.ID, &other, c.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Hour)
	if _, err := s.Sweep(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RestoreAlbum(acct.ID, "album"); fault.ErrorCode(err) != fault.ECodeAlbumNotInTrash {
		t.Fatalf("restoring a purged album: %v", err)
	}
	if held, err := s.Holds(acct.ID, ciphertext.Hash); err != nil || !held {
		// a3, deleted alone, is purged later (30 days); it still names the
		// ciphertext, so the account holds it.
		t.Fatalf("the ciphertext a3 still names: held %v (%v)", held, err)
	}
}
