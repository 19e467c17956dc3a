package kv

import (
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sealbox/kv/fault"
)

// TestMigrateRunsEachStepOnce: a step another node already recorded (the
// format read inside the step's own transaction is its target or later) is
// skipped, so nodes that start together on one old store migrate it once.
func TestMigrateRunsEachStepOnce(t *testing.T) {
	s, err := openFile(filepath.Join(t.TempDir(), "sealbox.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var applied bool
	step := []Migration{{To: FormatVersion, Name: "counted", apply: func(Tx, time.Time) error {
		applied = true
		return nil
	}}}
	if err := s.migrate(step); err != nil || applied {
		t.Fatalf("a step at the store's own format: err %v, applied %v; want it skipped", err, applied)
	}
	if err := s.update(func(tx Tx) error { return writeFormat(tx, FormatVersion-1) }); err != nil {
		t.Fatal(err)
	}
	if err := s.migrate(step); err != nil || !applied {
		t.Fatalf("a pending step: err %v, applied %v; want it run", err, applied)
	}
	if v, _, err := s.Format(); err != nil || v != FormatVersion {
		t.Fatalf("format after the step: %d, %v", v, err)
	}
}

// TestMigrateUploadsByAccount: a format 4 store's open sessions join the
// per-account index, so the cap on open sessions counts them.
func TestMigrateUploadsByAccount(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sealbox.db")
	s, err := openFile(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := s.now()
	for _, token := range []string{"sbx_up_1", "sbx_up_2"} {
		if err := s.update(func(tx Tx) error {
			return putUpload(tx, HashToken(token), &Upload{AccountID: "acct", AlbumID: "album", CreatedAt: now, ExpiresAt: now.Add(time.Hour)})
		}); err != nil {
			t.Fatal(err)
		}
	}
	// What a format 4 store holds: the sessions, no index of them by account.
	if err := s.update(func(tx Tx) error {
		if err := clearBucket(tx.Bucket(bucketUploadsByAccount)); err != nil {
			return err
		}
		return writeFormat(tx, 4)
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = openFile(path, Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.view(func(tx Tx) error { return checkOpenUploads(tx, "acct", s.now(), 2) }); fault.ErrorCode(err) != fault.ECodeLimitUploadSessions {
		t.Fatalf("after the migration, a third session of two allowed: %v", err)
	}
}

// TestMigrateFormats7And8: a format 6 store's holdings, links and applied
// ops are indexed as the writers of format 8 index them (the indexes a
// format 8 store built as it went, cleared and built again by the
// migrations to 7 and 8, are the same).
func TestMigrateFormats7And8(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sealbox.db")
	s, err := openFile(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddAccount(&Account{ID: "acct", Email: "a@example.org"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ProvisionAlbum("acct", "album", "2026-09-01"); err != nil {
		t.Fatal(err)
	}
	hash := func(c string) string { return strings.Repeat(c, 64) }
	if _, err := s.OpenUpload("acct", "album", "sbx_up_1", time.Hour, 0); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"c", "d"} {
		if _, err := s.AddUploadBlob("acct", "sbx_up_1", Blob{Hash: hash(c), Size: 10}, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	for i, asset := range []string{"a1", "a2"} {
		if _, err := s.ApplyOp("acct", &Op{AlbumID: "album", AssetID: asset, Action: OpCreate, ProtocolVersion: "2026-09-01",
			CreatedByUser: "acct", CiphertextHash: hash("c"), MetadataBlobHash: hash(string(rune('e' + i))),
			Metadata: &Blob{Hash: hash(string(rune('e' + i))), Size: 1}, Manifest: Blob{Hash: hash(string(rune('1' + i))), Size: 5}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreateShare(strings.Repeat("9", 32), &Share{AccountID: "acct", MetadataHash: hash("d"), Serves: []string{hash("d")}}, ShareLimits{Links: 10, Serves: 10}); err != nil {
		t.Fatal(err)
	}
	indexes := [][]byte{bucketBlobHolders, bucketSharesByAccount, bucketAssetBlobs, bucketBlobRefs}
	dump := func() map[string]string {
		out := map[string]string{}
		if err := s.view(func(tx Tx) error {
			for _, b := range indexes {
				if err := scanPages(tx.Bucket(b), func(k, v []byte) error {
					out[string(b)+"/"+string(k)] = string(v)
					return nil
				}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	built := dump()
	// Holders: the two uploads, two manifests, two metadata blobs; one
	// link; each asset names its manifest, metadata and the shared
	// ciphertext; the account names five blobs.
	if len(built) != 6+1+6+5 {
		t.Fatalf("the writers' indexes: %d rows, want 18: %v", len(built), built)
	}
	// What a format 6 store holds: none of the indexes.
	if err := s.update(func(tx Tx) error {
		for _, b := range indexes {
			if err := clearBucket(tx.Bucket(b)); err != nil {
				return err
			}
		}
		return writeFormat(tx, 6)
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = openFile(path, Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if migrated := dump(); !maps.Equal(migrated, built) {
		t.Fatalf("after the migration:\n%v\nwant\n%v", migrated, built)
	}
}
