package kv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sealbox/kv/bolt"
	"sealbox/kv/fault"
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

// TestShareStoreGrowth: one account holding 2,000 tiny blobs posts 40 links
// naming all of them, then revokes and posts again. Its links hold at most
// ShareLimits.Serves served hashes whatever it posts: the links past the
// cap are refused and store nothing. Each link used to store a row per
// served hash without bound (40 links of 10,000 took a store from 8 to
// 118 MiB).
func TestShareStoreGrowth(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "sealbox.db")
	e, err := bolt.Open(path, bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenEngine(e, path, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const held, links = 2000, 40
	hashes := make([]string, held)
	for i := range hashes {
		hashes[i] = fmt.Sprintf("%064x", i)
	}
	err = s.update(func(tx Tx) error {
		for _, h := range hashes {
			if err := tx.Bucket(bucketHoldings).Put(holdingKey("acct", h), member); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	lim := ShareLimits{Links: 1000, Serves: 5 * held}
	post := func(round int) (created int) {
		for i := range links {
			err := s.CreateShare(fmt.Sprintf("%02x%030x", round, i), &Share{AccountID: "acct", MetadataHash: hashes[0], Serves: hashes}, lim)
			switch {
			case err == nil:
				created++
			case fault.ErrorCode(err) != fault.ECodeLimitShares:
				t.Fatalf("link %d: %v", i, err)
			}
		}
		return created
	}
	served := func() int {
		t.Helper()
		n := 0
		err := s.view(func(tx Tx) error {
			n = 0
			return scanPages(tx.Bucket(bucketShareBlobs), func(_, _ []byte) error { n++; return nil })
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if created := post(0); created != 5 || served() != lim.Serves {
		t.Fatalf("%d links created serving %d hashes, want 5 serving %d", created, served(), lim.Serves)
	}
	for i := range links {
		if err := s.RevokeShare("acct", fmt.Sprintf("%02x%030x", 0, i)); err != nil {
			t.Fatal(err)
		}
	}
	if created := post(1); created != 5 || served() != lim.Serves {
		t.Fatalf("after revoking, %d links created serving %d hashes, want 5 serving %d", created, served(), lim.Serves)
	}
}
