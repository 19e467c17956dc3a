package kv

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sealbox/kv/bolt"
)

func TestDanglingReferencesFindsUnrecordedBlobs(t *testing.T) {
	s, err := openFile(filepath.Join(t.TempDir(), "sealbox.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	recorded, dangling := strings.Repeat("a", 64), strings.Repeat("b", 64)
	err = s.update(func(tx Tx) error {
		if err := tx.Bucket(bucketBlobs).Put([]byte(recorded), encode(&blobRecord{Size: 1})); err != nil {
			return err
		}
		shareKey := HashToken("some share")
		for _, h := range []string{recorded, dangling} {
			if err := tx.Bucket(bucketShareBlobs).Put(join(shareKey, []byte(h)), []byte{1}); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bucketAssets).Put(assetKey("album", "asset"), encode(&assetRecord{Head: strings.Repeat("c", 64)})); err != nil {
			return err
		}
		return tx.Bucket(bucketUploadBlobs).Put(join(HashToken("upload"), []byte(recorded)), []byte{1})
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.DanglingReferences(10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !strings.Contains(got[0], dangling) || !strings.Contains(got[0], "share link") ||
		!strings.Contains(got[1], strings.Repeat("c", 64)) || !strings.Contains(got[1], "provenance chain") {
		t.Fatalf("got %v", got)
	}
}

func TestSnapshotOpensAsAStore(t *testing.T) {
	dir := t.TempDir()
	s, err := openFile(filepath.Join(dir, "sealbox.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.AddAccount(&Account{ID: "a", Email: "a@example.org"}); err != nil {
		t.Fatal(err)
	}
	snap := openSnapshot(t, dir, s.WriteSnapshot)
	if problems, err := snap.CheckIntegrity(); err != nil || len(problems) != 0 {
		t.Fatalf("snapshot integrity: %v %v", problems, err)
	}
	if _, err := snap.AccountByEmail("a@example.org"); err != nil {
		t.Fatalf("the snapshot lacks the account: %v", err)
	}
}

// TestCopiedSnapshotOpensAsAStore: the record-by-record snapshot, which a
// store in PostgreSQL takes, holds every bucket's records across pages and
// opens as a bbolt store of the same format.
func TestCopiedSnapshotOpensAsAStore(t *testing.T) {
	dir := t.TempDir()
	s, err := openFile(filepath.Join(dir, "sealbox.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// More accounts than one copy page holds.
	const n = 2100
	err = s.update(func(tx Tx) error {
		for i := range n {
			a := &Account{ID: fmt.Sprintf("acct-%d", i), Email: fmt.Sprintf("u%d@example.org", i)}
			if err := tx.Bucket(bucketAccounts).Put([]byte(a.ID), encode(a)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddAccount(&Account{ID: "a", Email: "a@example.org"}); err != nil {
		t.Fatal(err)
	}
	snap := openSnapshot(t, dir, func(w io.Writer) (int64, error) { return s.copySnapshot(w, bolt.OpenScratch) })
	if v, _, err := snap.Format(); err != nil || v != FormatVersion {
		t.Fatalf("snapshot format %d, %v", v, err)
	}
	if _, err := snap.AccountByEmail("a@example.org"); err != nil {
		t.Fatalf("the snapshot lacks the account: %v", err)
	}
	var copied int
	err = snap.view(func(tx Tx) error {
		return scanPages(tx.Bucket(bucketAccounts), func(_, _ []byte) error { copied++; return nil })
	})
	if err != nil || copied != n+1 {
		t.Fatalf("the snapshot holds %d accounts (%v), want %d", copied, err, n+1)
	}
}

// openSnapshot writes a snapshot with write into dir and opens it, read-only,
// as a store; it is closed when the test ends.
func openSnapshot(t *testing.T, dir string, write func(io.Writer) (int64, error)) *Store {
	t.Helper()
	var buf bytes.Buffer
	if _, err := write(&buf); err != nil {
		t.Fatal(err)
	}
	snapPath := filepath.Join(dir, "snap.db")
	if err := os.WriteFile(snapPath, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	snap, err := openFile(snapPath, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { snap.Close() })
	return snap
}
