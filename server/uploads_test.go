package server_test

import (
	"bytes"
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sealbox/blobs"
	"sealbox/server"
	"sealbox/server/servertest"
)

// blobFiles lists every regular file under the test server's blob
// directory, temp files included; on S3, every blob and every partial.
func blobFiles(tb testing.TB, ts *TestServer) []string {
	tb.Helper()
	var files []string
	local, ok := ts.Blobs.(*blobs.Dir)
	if !ok {
		err := ts.Blobs.Walk(func(i blobs.Info) error {
			files = append(files, "blob/"+i.Hash)
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
		partials, err := ts.Blobs.StalePartials(time.Now().Add(24 * time.Hour))
		if err != nil {
			tb.Fatal(err)
		}
		for _, p := range partials {
			files = append(files, "tus/"+p.ID)
		}
		return files
	}
	err := filepath.WalkDir(local.Path(), func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return files
}

func TestUploadRoundTrip(t *testing.T) {
	ts := MustOpenServer(t)
	alice := ts.Register(t, "alice@example.org")
	album := ts.NewAlbum(t, alice.Access)
	r := ts.Do(t, Req{Method: "POST", Path: "/v1/albums/" + album + "/uploads", Token: alice.Access}).WantStatus(t, http.StatusCreated)
	m := r.JSON(t)
	up := m["upload_id"].(string)
	if !strings.HasPrefix(up, "sbx_up_") || m["expires_at"] != "2026-11-22T11:00:00Z" {
		t.Fatalf("open: %s", r.Body)
	}
	data := []byte("ciphertext bytes, sealed on the client")
	hash := servertest.HashOf(data)
	want := `{"hash":"` + hash + `","size":38}`
	r = ts.PutBlob(t, alice.Access, up, data).WantStatus(t, http.StatusCreated)
	if string(r.Body) != want {
		t.Fatalf("put: got %s, want %s", r.Body, want)
	}
	// The same bytes again: already held, same body.
	r = ts.PutBlob(t, alice.Access, up, data).WantStatus(t, http.StatusOK)
	if string(r.Body) != want {
		t.Fatalf("repeat put: got %s, want %s", r.Body, want)
	}
	if stored, _ := ts.StoredBlob(t, hash); !bytes.Equal(stored, data) {
		t.Fatalf("stored %q", stored)
	}
	if held, _ := ts.Store.Holds(ts.UserID(t, alice.Access), hash); !held {
		t.Fatal("the uploader does not hold the blob")
	}
	if got, err := ts.Store.UploadBlobs(ts.UserID(t, alice.Access), up); err != nil || len(got) != 1 || got[0] != hash {
		t.Fatalf("the session's hash set: %v, %v", got, err)
	}

	// Another account storing the same bytes comes to hold them too: 201.
	bob := ts.Register(t, "bob@example.org")
	bobUp := ts.OpenUpload(t, bob.Access, ts.NewAlbum(t, bob.Access))
	ts.PutBlob(t, bob.Access, bobUp, data).WantStatus(t, http.StatusCreated)

	// An empty blob is a blob.
	ts.PutBlob(t, alice.Access, up, nil).WantStatus(t, http.StatusCreated)

	ts.Do(t, Req{Method: "DELETE", Path: "/v1/uploads/" + up, Token: alice.Access}).WantStatus(t, http.StatusNoContent)
	ts.PutBlob(t, alice.Access, up, data).WantProblem(t, http.StatusNotFound, "error.upload.not_found")
	ts.Do(t, Req{Method: "DELETE", Path: "/v1/uploads/" + up, Token: alice.Access}).WantProblem(t, http.StatusNotFound, "error.upload.not_found")
	if held, _ := ts.Store.Holds(ts.UserID(t, alice.Access), hash); !held {
		t.Fatal("closing the session dropped the holding")
	}
}

func TestUploadHashMismatchKeepsNothing(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	up := ts.OpenUpload(t, tok.Access, ts.NewAlbum(t, tok.Access))
	claimed := servertest.HashOf([]byte("what the client meant to send"))
	r := ts.Do(t, Req{Method: "PUT", Path: "/v1/uploads/" + up + "/blobs/" + claimed, Token: tok.Access,
		Body: []byte("what arrived"), ContentType: "application/octet-stream"})
	r.WantProblem(t, http.StatusUnprocessableEntity, "error.blob.hash_mismatch")
	if files := blobFiles(t, ts); len(files) != 0 {
		t.Fatalf("a refused blob left files: %v", files)
	}
	user := ts.UserID(t, tok.Access)
	for _, h := range []string{claimed, servertest.HashOf([]byte("what arrived"))} {
		if held, _ := ts.Store.Holds(user, h); held {
			t.Fatalf("a refused blob was recorded as held: %s", h)
		}
	}
	if n, _ := ts.Store.HeldBytes(user); n != 0 {
		t.Fatalf("held bytes after a refused upload: %d", n)
	}
	if got, _ := ts.Store.Blobs("", 10); len(got) != 0 {
		t.Fatalf("blob records after a refused upload: %v", got)
	}
}

func TestUploadMaxBlob(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.MaxBlob = 1024 })
	tok := ts.Register(t, "a@example.org")
	up := ts.OpenUpload(t, tok.Access, ts.NewAlbum(t, tok.Access))
	big := bytes.Repeat([]byte{7}, 1025)
	wantEmpty413 := func(r *Response) {
		t.Helper()
		r.WantStatus(t, http.StatusRequestEntityTooLarge)
		if len(r.Body) != 0 {
			t.Fatalf("413 with a body: %q", r.Body)
		}
	}
	// Announced by Content-Length: refused before a byte is read.
	wantEmpty413(ts.PutBlob(t, tok.Access, up, big))
	// Chunked, no Content-Length: refused once the stream passes the limit.
	wantEmpty413(ts.PutBlobChunked(t, tok.Access, up, big, "application/octet-stream"))
	if files := blobFiles(t, ts); len(files) != 0 {
		t.Fatalf("a refused blob left files: %v", files)
	}
	// Exactly the limit is fine.
	ts.PutBlob(t, tok.Access, up, big[:1024]).WantStatus(t, http.StatusCreated)
}

// TestUploadChunkedMediaType: server/PROTOCOL.md §1 requires the media type of a
// non-empty body only. A chunked body announces no length, so whether it is
// empty is known by reading: an empty one needs no Content-Type, a non-empty
// one of the wrong type is 415 and stores nothing.
func TestUploadChunkedMediaType(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	up := ts.OpenUpload(t, tok.Access, ts.NewAlbum(t, tok.Access))
	putChunked := func(data []byte, contentType string) *Response {
		t.Helper()
		return ts.PutBlobChunked(t, tok.Access, up, data, contentType)
	}
	putChunked([]byte("sealed"), "text/plain").WantProblem(t, http.StatusUnsupportedMediaType, "error.request.unsupported_media_type")
	putChunked([]byte("sealed"), "").WantProblem(t, http.StatusUnsupportedMediaType, "error.request.unsupported_media_type")
	if files := blobFiles(t, ts); len(files) != 0 {
		t.Fatalf("a refused blob left files: %v", files)
	}
	putChunked(nil, "").WantStatus(t, http.StatusCreated)
	putChunked([]byte("sealed"), "application/octet-stream").WantStatus(t, http.StatusCreated)
}

func TestUploadIdleExpiry(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.AccessTTL = 24 * time.Hour })
	tok := ts.Register(t, "a@example.org")
	album := ts.NewAlbum(t, tok.Access)
	up := ts.OpenUpload(t, tok.Access, album)
	inFlight := func(want int) {
		t.Helper()
		if n, err := ts.Store.InFlight(album); err != nil || n != want {
			t.Fatalf("in flight: got %d, %v; want %d", n, err, want)
		}
	}
	inFlight(1)
	// Each write moves the expiry to an hour after it.
	ts.Clock.Advance(59 * time.Minute)
	ts.PutBlob(t, tok.Access, up, []byte("one")).WantStatus(t, http.StatusCreated)
	ts.Clock.Advance(59 * time.Minute)
	ts.PutBlob(t, tok.Access, up, []byte("two")).WantStatus(t, http.StatusCreated)
	inFlight(1)
	ts.Clock.Advance(time.Hour)
	inFlight(0)
	ts.PutBlob(t, tok.Access, up, []byte("three")).WantProblem(t, http.StatusNotFound, "error.upload.not_found")
	ts.Do(t, Req{Method: "DELETE", Path: "/v1/uploads/" + up, Token: tok.Access}).WantProblem(t, http.StatusNotFound, "error.upload.not_found")
	if n, err := ts.Store.Sweep(); err != nil || n != 1 {
		t.Fatalf("sweep: %d, %v (want the one live expiry entry; earlier ones were replaced)", n, err)
	}
	inFlight(0)
}

func TestUploadForeignSessionAndAlbum(t *testing.T) {
	ts := MustOpenServer(t)
	alice := ts.Register(t, "alice@example.org")
	bob := ts.Register(t, "bob@example.org")
	album := ts.NewAlbum(t, alice.Access)
	up := ts.OpenUpload(t, alice.Access, album)
	data := []byte("alice's ciphertext")
	ts.PutBlob(t, bob.Access, up, data).WantProblem(t, http.StatusNotFound, "error.upload.not_found")
	ts.Do(t, Req{Method: "DELETE", Path: "/v1/uploads/" + up, Token: bob.Access}).WantProblem(t, http.StatusNotFound, "error.upload.not_found")
	if files := blobFiles(t, ts); len(files) != 0 {
		t.Fatalf("a refused upload wrote files: %v", files)
	}
	// Bob cannot open a session on Alice's album: it answers as an unknown one.
	ts.Do(t, Req{Method: "POST", Path: "/v1/albums/" + album + "/uploads", Token: bob.Access}).WantProblem(t, http.StatusNotFound, "error.album.not_found")
	ts.Do(t, Req{Method: "POST", Path: "/v1/albums/9f0e0d0c-0b0a-4908-8706-050403020100/uploads", Token: bob.Access}).WantProblem(t, http.StatusNotFound, "error.album.not_found")
	// Alice's session is untouched.
	ts.PutBlob(t, alice.Access, up, data).WantStatus(t, http.StatusCreated)
}

func TestUploadRequestValidation(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	album := ts.NewAlbum(t, tok.Access)
	up := ts.OpenUpload(t, tok.Access, album)
	data := []byte("x")
	hash := servertest.HashOf(data)
	unknown := "sbx_up_" + strings.Repeat("A", 43)
	cases := []servertest.Scenario{
		{Name: "open without token", Method: "POST", Path: "/v1/albums/" + album + "/uploads", WantStatus: 401, WantCode: "error.auth.unauthenticated"},
		{Name: "open, album id not a UUID", Method: "POST", Path: "/v1/albums/not-a-uuid/uploads", Token: tok.Access, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "open, album id uppercase", Method: "POST", Path: "/v1/albums/" + strings.ToUpper(album) + "/uploads", Token: tok.Access, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "put without token", Method: "PUT", Path: "/v1/uploads/" + up + "/blobs/" + hash, Body: data, ContentType: "application/octet-stream", WantStatus: 401, WantCode: "error.auth.unauthenticated"},
		{Name: "put, hash uppercase", Method: "PUT", Path: "/v1/uploads/" + up + "/blobs/" + strings.ToUpper(hash), Token: tok.Access, Body: data, ContentType: "application/octet-stream", WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "put, hash short", Method: "PUT", Path: "/v1/uploads/" + up + "/blobs/" + hash[:63], Token: tok.Access, Body: data, ContentType: "application/octet-stream", WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "put, hash not hex", Method: "PUT", Path: "/v1/uploads/" + up + "/blobs/" + strings.Repeat("g", 64), Token: tok.Access, Body: data, ContentType: "application/octet-stream", WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "put, upload id malformed", Method: "PUT", Path: "/v1/uploads/sbx_up_/blobs/" + hash, Token: tok.Access, Body: data, ContentType: "application/octet-stream", WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "put, upload id well-formed but short, unknown", Method: "PUT", Path: "/v1/uploads/sbx_up_short/blobs/" + hash, Token: tok.Access, Body: data, ContentType: "application/octet-stream", WantStatus: 404, WantCode: "error.upload.not_found"},
		{Name: "put, upload id of another type", Method: "PUT", Path: "/v1/uploads/sbx_at_" + strings.Repeat("A", 43) + "/blobs/" + hash, Token: tok.Access, Body: data, ContentType: "application/octet-stream", WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "put, unknown upload", Method: "PUT", Path: "/v1/uploads/" + unknown + "/blobs/" + hash, Token: tok.Access, Body: data, ContentType: "application/octet-stream", WantStatus: 404, WantCode: "error.upload.not_found"},
		{Name: "put, JSON body", Method: "PUT", Path: "/v1/uploads/" + up + "/blobs/" + hash, Token: tok.Access, Body: data, ContentType: "application/json", WantStatus: 415, WantCode: "error.request.unsupported_media_type"},
		{Name: "put, no media type", Method: "PUT", Path: "/v1/uploads/" + up + "/blobs/" + hash, Token: tok.Access, Body: data, Header: map[string]string{"Content-Type": ""}, WantStatus: 415, WantCode: "error.request.unsupported_media_type"},
		{Name: "delete, upload id malformed", Method: "DELETE", Path: "/v1/uploads/nope", Token: tok.Access, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "delete, unknown upload", Method: "DELETE", Path: "/v1/uploads/" + unknown, Token: tok.Access, WantStatus: 404, WantCode: "error.upload.not_found"},
	}
	servertest.RunScenarios(t, ts.Client, cases)
	if files := blobFiles(t, ts); len(files) != 0 {
		t.Fatalf("refused uploads wrote files: %v", files)
	}
}

func TestInFlightCountsOpenSessionsPerAlbum(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	x, y := ts.NewAlbum(t, tok.Access), ts.NewAlbum(t, tok.Access)
	first := ts.OpenUpload(t, tok.Access, x)
	ts.OpenUpload(t, tok.Access, x)
	ts.OpenUpload(t, tok.Access, y)
	count := func(album string) int {
		n, err := ts.Store.InFlight(album)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if count(x) != 2 || count(y) != 1 {
		t.Fatalf("in flight: x %d, y %d", count(x), count(y))
	}
	ts.Do(t, Req{Method: "DELETE", Path: "/v1/uploads/" + first, Token: tok.Access}).WantStatus(t, http.StatusNoContent)
	if count(x) != 1 || count(y) != 1 {
		t.Fatalf("after close: x %d, y %d", count(x), count(y))
	}
}
