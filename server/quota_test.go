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
