package kv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sealbox/kv/bolt"
)

// storeBytes counts the records of every bucket and sums their keys' and
// values' lengths.
func storeBytes(t *testing.T, s *Store) (records, bytes int) {
	t.Helper()
	err := s.view(func(tx Tx) error {
		records, bytes = 0, 0
		for _, b := range storeBuckets() {
			if err := scanPages(tx.Bucket(b), func(k, v []byte) error {
				records++
				bytes += len(k) + len(v)
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return records, bytes
}

// TestRefreshChainStoreGrowth: 10,000 rotations of one session leave the
// store holding what one session needs (reuse detection keeps one chain
// record, not one per rotation), and the bbolt file grows by under 64 KiB.
// Each rotation used to keep a spent-token record and its expiry entry for
// 30 days: 1,740,000 bytes of records and a 4 MiB file after the same run.
// The first token of the chain, presented at the end, is still recognised
// as reuse.
func TestRefreshChainStoreGrowth(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "sealbox.db")
	// The file's size is measured, not its durability: no fsyncs.
	e, err := bolt.Open(path, bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenEngine(e, path, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	session := func(n int) *Session {
		return &Session{ID: fmt.Sprintf("0b5f2a9e-7c1d-4e8a-b3f6-%012d", n), CreatedAt: now, AuthenticatedAt: now,
			AccessExpiresAt: now.Add(15 * time.Minute), RefreshExpiresAt: now.Add(720 * time.Hour)}
	}
	chain := [refreshChainLen]byte{1, 2, 3}
	token := func(n int) string { return RefreshToken(chain, [refreshSecretLen]byte{byte(n), byte(n >> 8)}) }
	first := session(0)
	first.AccountID = "0b5f2a9e-7c1d-4e8a-b3f6-9d2c4e6a8b10"
	if err := s.CreateAccount(&Account{ID: first.AccountID, Email: "a@example.org", CreatedAt: now}, first, "sbx_at_0", token(0)); err != nil {
		t.Fatal(err)
	}
	records0, bytes0 := storeBytes(t, s)
	const rotations = 10000
	for i := 1; i <= rotations; i++ {
		now = now.Add(time.Second)
		if err := s.Refresh(token(i-1), session(i), fmt.Sprintf("sbx_at_%d", i), token(i), 365*24*time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	records1, bytes1 := storeBytes(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after %d rotations: records %d -> %d, bytes %d -> %d, file %d bytes", rotations, records0, records1, bytes0, bytes1, fi.Size())
	if records1 != records0 || bytes1-bytes0 > 16 {
		t.Fatalf("the store grew by %d records, %d bytes over %d rotations; want none", records1-records0, bytes1-bytes0, rotations)
	}
	if fi.Size() > 64<<10 {
		t.Fatalf("the bbolt file is %d bytes after %d rotations; want under 64 KiB", fi.Size(), rotations)
	}
	if s, err = openFile(path, Options{Now: func() time.Time { return now }}); err != nil {
		t.Fatal(err)
	}
	err = s.Refresh(token(0), session(rotations+1), "sbx_at_x", token(rotations+1), 365*24*time.Hour)
	if err == nil {
		t.Fatal("the chain's first token was accepted after 10,000 rotations")
	}
	if _, err := s.Authenticate(fmt.Sprintf("sbx_at_%d", rotations)); err == nil {
		t.Fatal("reuse of the chain's first token left its live session open")
	}
}
