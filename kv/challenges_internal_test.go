package kv

import (
	"path/filepath"
	"testing"
	"time"
)

// TestMigrationIndexesPendingChallenges: a challenge pending when a format-4
// store is upgraded (no account index then) is indexed by the migration, so
// a global sign-out right after the upgrade still deletes it.
func TestMigrationIndexesPendingChallenges(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "sealbox.db")
	s, err := openFile(path, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateMFAChallenge("sbx_mfa_pending", "acct-1", now.Add(5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	// As format 4 left it: the challenge without its index entry.
	err = s.update(func(tx Tx) error {
		if err := clearBucket(tx.Bucket(bucketMFAChallengesByAccount)); err != nil {
			return err
		}
		return writeFormat(tx, 4)
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = openFile(path, Options{Now: func() time.Time { return now }}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := countKeys(t, s, bucketMFAChallengesByAccount); n != 1 {
		t.Fatalf("index entries after the migration: got %d, want 1", n)
	}
	if _, err := s.DeleteAccountSessions("acct-1"); err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{bucketMFAChallenges, bucketMFAChallengesByAccount, bucketExpiry} {
		if n := countKeys(t, s, b); n != 0 {
			t.Fatalf("%s after a global sign-out: got %d entries, want 0", b, n)
		}
	}
}
