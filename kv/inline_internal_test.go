package kv

import (
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestInlineProblems: check's view of damaged inline blobs. A record
// whose bytes are missing or of another size is found without deep;
// bytes that no longer hash to their name only with deep; bytes kept for
// a blob not recorded as inline always.
func TestInlineProblems(t *testing.T) {
	s, err := openFile(filepath.Join(t.TempDir(), "sealbox.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	blob := func(data string) Blob {
		return Blob{Hash: address([]byte(data)), Size: int64(len(data)), Data: []byte(data)}
	}
	missing, resized, altered, stray := blob("missing"), blob("resized"), blob("altered"), blob("stray")
	err = s.update(func(tx Tx) error {
		for _, b := range []Blob{missing, resized, altered} {
			if err := tx.Bucket(bucketAccounts).Put([]byte("acct"), encode(&Account{ID: "acct"})); err != nil {
				return err
			}
			if _, err := holdBlob(tx, "acct", b, now); err != nil {
				return err
			}
		}
		inline := tx.Bucket(bucketInlineBlobs)
		if err := inline.Delete([]byte(missing.Hash)); err != nil {
			return err
		}
		if err := inline.Put([]byte(resized.Hash), []byte("resize")); err != nil {
			return err
		}
		if err := inline.Put([]byte(altered.Hash), []byte("ALTERED")); err != nil {
			return err
		}
		return inline.Put([]byte(stray.Hash), stray.Data)
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"blob " + missing.Hash + ": recorded inline but its bytes are missing from the store",
		"blob " + resized.Hash + ": 6 bytes kept inline, 7 recorded",
		"blob " + stray.Hash + ": kept inline but not recorded as an inline blob",
	}
	deepWant := append(slices.Clone(want), "blob "+altered.Hash+": its inline bytes no longer hash to its name")
	for _, tc := range []struct {
		deep bool
		want []string
	}{{false, want}, {true, deepWant}} {
		got, err := s.InlineProblems(tc.deep, 10)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		slices.Sort(tc.want)
		if !slices.Equal(got, tc.want) {
			t.Fatalf("deep %v: got %q, want %q", tc.deep, got, tc.want)
		}
	}
	if got, _ := s.InlineProblems(true, 2); len(got) != 2 {
		t.Fatalf("limit 2 reported %d problems", len(got))
	}
}
