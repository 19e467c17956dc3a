package server_test

import (
	"bytes"
	"testing"
)

func TestUploadPastQuotaStoresNothing(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "q@example.org")
	album := ts.NewAlbum(t, tok.Access)
	up := ts.OpenUpload(t, tok.Access, album)
	ts.PutBlob(t, tok.Access, up, bytes.Repeat([]byte{1}, 600)).WantStatus(t, 201)
	if err := ts.Store.SetQuota("q@example.org", 1000); err != nil {
		t.Fatal(err)
	}
	before := blobFiles(t, ts)
	ts.PutBlob(t, tok.Access, up, bytes.Repeat([]byte{2}, 401)).WantProblem(t, 403, "error.quota.exceeded")
	if after := blobFiles(t, ts); len(after) != len(before) {
		t.Fatalf("a refused upload left a file: %v", after)
	}
	// An already-held blob costs nothing; up to the quota still fits.
	ts.PutBlob(t, tok.Access, up, bytes.Repeat([]byte{1}, 600)).WantStatus(t, 200)
	ts.PutBlob(t, tok.Access, up, bytes.Repeat([]byte{3}, 400)).WantStatus(t, 201)
}

// TestChunkedUploadPastQuotaStoresNothing: a body without Content-Length
// announces nothing to check in advance, so the quota must bound the stream
// itself (issue 7.6: refused uploads store nothing).
func TestChunkedUploadPastQuotaStoresNothing(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "q@example.org")
	up := ts.OpenUpload(t, tok.Access, ts.NewAlbum(t, tok.Access))
	held := bytes.Repeat([]byte{1}, 600)
	ts.PutBlob(t, tok.Access, up, held).WantStatus(t, 201)
	if err := ts.Store.SetQuota("q@example.org", 1000); err != nil {
		t.Fatal(err)
	}
	before := blobFiles(t, ts)
	wantRefused := func(data []byte) {
		t.Helper()
		ts.PutBlobChunked(t, tok.Access, up, data, "application/octet-stream").WantProblem(t, 403, "error.quota.exceeded")
		if after := blobFiles(t, ts); len(after) != len(before) {
			t.Fatalf("a refused upload left a file: %v", after)
		}
	}
	wantRefused(bytes.Repeat([]byte{2}, 401))
	// An already-held blob costs nothing, however large.
	ts.PutBlobChunked(t, tok.Access, up, held, "application/octet-stream").WantStatus(t, 200)
	// Exactly the room left fits; then no byte more does.
	ts.PutBlobChunked(t, tok.Access, up, bytes.Repeat([]byte{3}, 400), "application/octet-stream").WantStatus(t, 201)
	before = blobFiles(t, ts)
	wantRefused([]byte{4})
	if n, _ := ts.Store.HeldBytes(ts.UserID(t, tok.Access)); n != 1000 {
		t.Fatalf("held bytes: got %d, want 1000", n)
	}
}
