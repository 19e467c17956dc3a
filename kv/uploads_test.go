package kv_test

import (
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/kv/kvtest"
)

func TestUploadSessionLifecycle(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	ensureAccount(t, s, "acct")
	const token = "sbx_up_SECRETUPLOADTOKEN0123456789"
	if _, err := s.OpenUpload("acct", "album", token, time.Hour, 0); fault.ErrorCode(err) != fault.ECodeAlbumNotFound {
		t.Fatalf("unknown album: %v", err)
	}
	if _, _, err := s.ProvisionAlbum("acct", "album", "2026-09-01"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OpenUpload("other", "album", token, time.Hour, 0); fault.ErrorCode(err) != fault.ECodeAlbumNotFound {
		t.Fatalf("another account's album: %v", err)
	}
	up, err := s.OpenUpload("acct", "album", token, time.Hour, 0)
	if err != nil || !up.ExpiresAt.Equal(c.Now().Add(time.Hour)) {
		t.Fatalf("open: %+v, %v", up, err)
	}
	if _, err := s.Upload("other", token); fault.ErrorCode(err) != fault.ECodeUploadNotFound {
		t.Fatalf("another account's session: %v", err)
	}
	c.Advance(30 * time.Minute)
	if _, err := s.AddUploadBlob("acct", token, kv.Blob{Hash: hexHash('c'), Size: 3}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if up, _ := s.Upload("acct", token); !up.ExpiresAt.Equal(c.Now().Add(time.Hour)) {
		t.Fatalf("a write did not move the expiry: %v", up.ExpiresAt)
	}
	if hashes, err := s.UploadBlobs("acct", token); err != nil || len(hashes) != 1 || hashes[0] != hexHash('c') {
		t.Fatalf("hash set: %v, %v", hashes, err)
	}
	// Sweeping before the (moved) expiry keeps the session.
	c.Advance(59 * time.Minute)
	if _, err := s.Sweep(); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.InFlight("album"); n != 1 {
		t.Fatalf("in flight before expiry: %d", n)
	}
	c.Advance(time.Minute)
	if _, err := s.AddUploadBlob("acct", token, kv.Blob{Hash: hexHash('d'), Size: 3}, time.Hour); fault.ErrorCode(err) != fault.ECodeUploadNotFound {
		t.Fatalf("write to an expired session: %v", err)
	}
	if n, err := s.Sweep(); err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v", n, err)
	}
	if n, _ := s.InFlight("album"); n != 0 {
		t.Fatalf("in flight after expiry: %d", n)
	}
	if ok, _ := s.Holds("acct", hexHash('c')); !ok {
		t.Fatal("the session's expiry dropped the holding")
	}
	path := s.Path()
	s.Close()
	assertFileLacks(t, path, token)
}
