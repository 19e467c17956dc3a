package kv

import (
	"path/filepath"
	"testing"
	"time"
)

// TestMigrationDatesRevokedShares: a link revoked before format 5 kept its
// record with no revocation time and no sweep entry, so it would stay for
// good. The migration dates it at the migration's time; the sweep then
// replaces it by a tombstone 30 days later, and the id stays taken.
func TestMigrationDatesRevokedShares(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	path := filepath.Join(t.TempDir(), "sealbox.db")
	s, err := openFile(path, Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	const id = "0000000000000000000000000000000a"
	// As format 4 left a revoked link: the record, undated, and nothing in
	// the expiry index.
	err = s.update(func(tx Tx) error {
		rec := &shareRecord{AccountID: "acct", Revoked: true}
		if err := tx.Bucket(bucketShares).Put(HashToken(id), encode(rec)); err != nil {
			return err
		}
		return writeFormat(tx, 4)
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	now = now.Add(time.Hour)
	if s, err = openFile(path, Options{Now: clock}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := countKeys(t, s, bucketExpiry); n != 1 {
		t.Fatalf("expiry entries after the migration: got %d, want 1 (the revoked link's sweep)", n)
	}
	now = now.Add(revokedShareKeep - time.Second)
	if _, err := s.Sweep(); err != nil {
		t.Fatal(err)
	}
	if n := countKeys(t, s, bucketShares); n != 1 {
		t.Fatalf("share records a second before the sweep: got %d, want 1", n)
	}
	now = now.Add(time.Second)
	if _, err := s.Sweep(); err != nil {
		t.Fatal(err)
	}
	if n, tombs := countKeys(t, s, bucketShares), countKeys(t, s, bucketShareTombstones); n != 0 || tombs != 1 {
		t.Fatalf("after the sweep: %d share records and %d tombstones, want 0 and 1", n, tombs)
	}
}

// TestMigrationIndexesSharesByAccount: the links made before format 7 count
// toward the caps after it: each is listed under its account with the blobs
// it serves, a revoked one with none.
func TestMigrationIndexesSharesByAccount(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	path := filepath.Join(t.TempDir(), "sealbox.db")
	s, err := openFile(path, Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	live, revoked := HashToken("0000000000000000000000000000000a"), HashToken("0000000000000000000000000000000b")
	// As format 6 left two links of one account, without their index.
	err = s.update(func(tx Tx) error {
		if err := tx.Bucket(bucketShares).Put(live, encode(&shareRecord{AccountID: "acct", CreatedAt: now})); err != nil {
			return err
		}
		for _, h := range []string{"h1", "h2"} {
			if err := tx.Bucket(bucketShareBlobs).Put(join(live, []byte(h)), member); err != nil {
				return err
			}
		}
		rec := &shareRecord{AccountID: "acct", CreatedAt: now, Revoked: true, RevokedAt: now}
		if err := tx.Bucket(bucketShares).Put(revoked, encode(rec)); err != nil {
			return err
		}
		return writeFormat(tx, 6)
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = openFile(path, Options{Now: clock}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var u shareUsage
	if err := s.view(func(tx Tx) error { u, err = accountShares(tx, "acct"); return err }); err != nil {
		t.Fatal(err)
	}
	if u.links != 2 || u.serves != 2 {
		t.Fatalf("after the migration: %d links serving %d blobs, want 2 serving 2", u.links, u.serves)
	}
}
