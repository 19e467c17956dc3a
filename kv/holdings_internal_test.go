package kv

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestBlobTotalsAreSharded: the totals of many blobs are spread over rows
// chosen by hash, and BlobTotals sums them to the count and bytes of the
// blob records, each blob once however many accounts hold it.
func TestBlobTotalsAreSharded(t *testing.T) {
	s, err := openFile(filepath.Join(t.TempDir(), "sealbox.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range []string{"acct-a", "acct-b"} {
		if err := s.AddAccount(&Account{ID: id, Email: id + "@example.org", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	var want int64
	err = s.update(func(tx Tx) error {
		want = 0 // the function may run twice (the retry test mode)
		for i := range 64 {
			sum := sha256.Sum256([]byte(fmt.Sprint(i)))
			b := Blob{Hash: hex.EncodeToString(sum[:]), Size: int64(100 + i)}
			want += b.Size
			for _, account := range []string{"acct-a", "acct-b"} {
				if _, err := holdBlob(tx, account, b, time.Now()); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if count, size, err := s.BlobTotals(); err != nil || count != 64 || size != want {
		t.Fatalf("totals: %d blobs, %d bytes (%v), want 64, %d", count, size, err, want)
	}
	rows := 0
	err = s.view(func(tx Tx) error {
		return scanPages(tx.Bucket(bucketTotals), func(k, v []byte) error {
			rows++
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if rows < 2 || rows > blobTotalShards {
		t.Fatalf("the totals are kept in %d rows, want between 2 and %d", rows, blobTotalShards)
	}
}
