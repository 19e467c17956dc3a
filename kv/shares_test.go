package kv_test

import (
	"errors"
	"testing"
	"time"

	"sealbox/kv"
)

func TestShareStoredUnderTheHashOfItsID(t *testing.T) {
	s, _ := MustOpenStore(t)
	holdVia(t, s, "acct", "album", kv.Blob{Hash: hexHash('a'), Size: 1})
	const id = "0123456789abcdef0123456789abcdef"
	if err := s.CreateShare(id, &kv.Share{AccountID: "acct", MetadataHash: hexHash('a'), Serves: []string{hexHash('a')}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SharedBlob(id, hexHash('a')); err != nil {
		t.Fatal(err)
	}
	path := s.Path()
	s.Close()
	// The opaque id is the capability: a copy of the file must not hold it.
	assertFileLacks(t, path, id)
}

func TestShareLifecycleInStore(t *testing.T) {
	s, c := MustOpenStore(t)
	holdVia(t, s, "acct", "album", kv.Blob{Hash: hexHash('a'), Size: 1})
	holdVia(t, s, "acct", "album", kv.Blob{Hash: hexHash('b'), Size: 2})
	const id = "fedcba9876543210fedcba9876543210"
	sh := &kv.Share{AccountID: "acct", MetadataHash: hexHash('a'), Serves: []string{hexHash('b'), hexHash('a')}, ExpiresAt: c.Now().Add(time.Hour)}
	if err := s.CreateShare(id, sh); err != nil {
		t.Fatal(err)
	}
	if b, err := s.SharedBlob(id, hexHash('b')); err != nil || b.Size != 2 || !b.StoredAt.Equal(c.Now()) {
		t.Fatalf("shared blob: %+v, %v", b, err)
	}
	if _, err := s.SharedBlob(id, hexHash('c')); !errors.Is(err, kv.ErrShareNotFound) {
		t.Fatalf("a blob the link does not name: %v", err)
	}
	c.Advance(time.Hour)
	if _, err := s.Share(id); !errors.Is(err, kv.ErrShareNotFound) {
		t.Fatalf("expired: %v", err)
	}
	if _, err := s.Sweep(); err != nil {
		t.Fatal(err)
	}
	// Once expired, the id is free again, for any account.
	holdVia(t, s, "other", "album-2", kv.Blob{Hash: hexHash('a'), Size: 1})
	if err := s.CreateShare(id, &kv.Share{AccountID: "other", MetadataHash: hexHash('a'), Serves: []string{hexHash('a')}}); err != nil {
		t.Fatalf("reuse after expiry: %v", err)
	}
	if _, err := s.SharedBlob(id, hexHash('b')); !errors.Is(err, kv.ErrShareNotFound) {
		t.Fatalf("the expired link's serves outlived it: %v", err)
	}
}
