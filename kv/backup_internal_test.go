package kv

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDanglingReferencesFindsUnrecordedBlobs(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "sealbox.db"), Options{})
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
	s, err := Open(filepath.Join(dir, "sealbox.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.AddAccount(&Account{ID: "a", Email: "a@example.org"}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := s.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	snapPath := filepath.Join(dir, "snap.db")
	if err := os.WriteFile(snapPath, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	snap, err := Open(snapPath, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	if problems, err := snap.CheckIntegrity(); err != nil || len(problems) != 0 {
		t.Fatalf("snapshot integrity: %v %v", problems, err)
	}
	if _, err := snap.AccountByEmail("a@example.org"); err != nil {
		t.Fatalf("the snapshot lacks the account: %v", err)
	}
}
