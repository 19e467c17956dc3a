package kv

import (
	"path/filepath"
	"testing"
	"time"
)

// Records keep every nanosecond of their times: keys built from a time are
// rebuilt from the decoded record to rewrite or delete them, so a production
// clock's sub-second times must survive the round trip.
func TestSessionTimesKeepNanoseconds(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.UTC)
	store, err := openFile(filepath.Join(t.TempDir(), "sealbox.db"), Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	acct := &Account{ID: "0b5f2a9e-7c1d-4e8a-b3f6-9d2c4e6a8b10", Email: "alice@example.com", CreatedAt: now}
	sess := &Session{ID: "0b5f2a9e-7c1d-4e8a-b3f6-9d2c4e6a8b11", AccountID: acct.ID, CreatedAt: now, AuthenticatedAt: now,
		AccessExpiresAt: now.Add(time.Hour), RefreshExpiresAt: now.Add(time.Hour)}
	if err := store.CreateAccount(acct, sess, "a", "r"); err != nil {
		t.Fatal(err)
	}
	// A rewrite of the session must replace its index entry, not add one.
	if err := store.Reauthenticated(acct.Email, sess.ID, now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	l, err := store.Ledger(acct.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := l.Sessions
	if len(got) != 1 || !got[0].CreatedAt.Equal(now) {
		t.Fatalf("sessions: got %d, first created %v; want 1 created %v", len(got), got[0].CreatedAt, now)
	}
	// A delete must remove the index and expiry entries it wrote.
	if err := store.DeleteSession(acct.ID, sess.ID); err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{bucketSessionsByAccount, bucketExpiry} {
		if n := countKeys(t, store, b); n != 0 {
			t.Fatalf("%s after the delete: got %d entries, want 0", b, n)
		}
	}
}

func countKeys(t *testing.T, s *Store, bucket []byte) int {
	t.Helper()
	n := 0
	err := s.view(func(tx Tx) error {
		n = 0
		return scanPages(tx.Bucket(bucket), func(_, _ []byte) error {
			n++
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
