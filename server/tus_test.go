package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sealbox/server"
	"sealbox/server/maintenance"
	"sealbox/server/servertest"
)

// tusMetadata is the Upload-Metadata header declaring hash.
func tusMetadata(hash string) string {
	return "hash " + base64.StdEncoding.EncodeToString([]byte(hash))
}

// tusHeaders are the headers of a tus request, with extra ones added.
func tusHeaders(extra ...string) map[string]string {
	h := map[string]string{"Tus-Resumable": "1.0.0"}
	for i := 0; i+1 < len(extra); i += 2 {
		h[extra[i]] = extra[i+1]
	}
	return h
}

// openTransfer is the scenario most tus tests start from: a fresh server,
// an account with an album and an upload session, and a transfer created
// for data, not yet written.
func openTransfer(tb testing.TB, data []byte) (ts *TestServer, tok Tokens, location string, _ []byte) {
	tb.Helper()
	ts = MustOpenServer(tb)
	tok = ts.Register(tb, "a@example.org")
	up := ts.OpenUpload(tb, tok.Access, ts.NewAlbum(tb, tok.Access))
	return ts, tok, ts.TusCreate(tb, tok.Access, up, data), data
}

// TusCreate creates a transfer of data through the upload session and
// returns its path (the Location).
func (ts *TestServer) TusCreate(tb testing.TB, access, uploadID string, data []byte) string {
	tb.Helper()
	r := ts.Do(tb, Req{Method: "POST", Path: "/v1/uploads/" + uploadID + "/tus", Token: access,
		Header: tusHeaders("Upload-Length", strconv.Itoa(len(data)), "Upload-Metadata", tusMetadata(servertest.HashOf(data)))})
	r.WantStatus(tb, http.StatusCreated)
	return r.Header.Get("Location")
}

// TusPatch sends body at offset.
func (ts *TestServer) TusPatch(tb testing.TB, access, location string, offset int, body []byte) *Response {
	tb.Helper()
	return ts.Do(tb, Req{Method: "PATCH", Path: location, Token: access, Body: body,
		ContentType: "application/offset+octet-stream", Header: tusHeaders("Upload-Offset", strconv.Itoa(offset))})
}

// TusHead answers the transfer's offset, failing unless HEAD is 200.
func (ts *TestServer) TusHead(tb testing.TB, access, location string) int {
	tb.Helper()
	r := ts.Do(tb, Req{Method: "HEAD", Path: location, Token: access, Header: tusHeaders()}).WantStatus(tb, http.StatusOK)
	n, err := strconv.Atoi(r.Header.Get("Upload-Offset"))
	if err != nil {
		tb.Fatalf("Upload-Offset %q", r.Header.Get("Upload-Offset"))
	}
	return n
}

// partialPath is where the server keeps the bytes of the transfer at
// location, in the local blob store (a test that calls it is skipped on
// S3).
func (ts *TestServer) partialPath(tb testing.TB, location string) string {
	tb.Helper()
	return filepath.Join(ts.LocalBlobs(tb).Path(), "tus", path.Base(location))
}

// wantStored fails unless the blob store holds exactly data under its hash.
func (ts *TestServer) wantStored(tb testing.TB, data []byte) {
	tb.Helper()
	f, _, err := ts.Blobs.Open(servertest.HashOf(data))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	got, err := io.ReadAll(f)
	if err != nil {
		tb.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		tb.Fatalf("the stored blob (%d bytes) differs from the %d uploaded", len(got), len(data))
	}
}

func wantHeaders(tb testing.TB, r *Response, want map[string]string) {
	tb.Helper()
	for k, v := range want {
		if got := r.Header.Get(k); got != v {
			tb.Errorf("%s: got %q, want %q", k, got, v)
		}
	}
}

func wantEmpty413(tb testing.TB, r *Response) {
	tb.Helper()
	r.WantStatus(tb, http.StatusRequestEntityTooLarge)
	if len(r.Body) != 0 {
		tb.Fatalf("413 with a body: %q", r.Body)
	}
}

func TestTusOptions(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.MaxBlob = 5 << 30 })
	alice := ts.Register(t, "alice@example.org")
	up := ts.OpenUpload(t, alice.Access, ts.NewAlbum(t, alice.Access))
	// OPTIONS alone needs no Tus-Resumable.
	r := ts.Do(t, Req{Method: "OPTIONS", Path: "/v1/uploads/" + up + "/tus", Token: alice.Access}).WantStatus(t, http.StatusNoContent)
	wantHeaders(t, r, map[string]string{
		"Tus-Resumable": "1.0.0", "Tus-Version": "1.0.0", "Tus-Extension": "creation,termination",
		"Tus-Max-Size": strconv.Itoa(5 << 30), "X-Content-Type-Options": "nosniff",
	})
	ts.Do(t, Req{Method: "OPTIONS", Path: "/v1/uploads/" + up + "/tus"}).WantProblem(t, http.StatusUnauthorized, "error.auth.unauthenticated")
	bob := ts.Register(t, "bob@example.org")
	ts.Do(t, Req{Method: "OPTIONS", Path: "/v1/uploads/" + up + "/tus", Token: bob.Access}).WantProblem(t, http.StatusNotFound, "error.upload.not_found")
}

func TestTusRoundTrip(t *testing.T) {
	ts := MustOpenServer(t)
	alice := ts.Register(t, "alice@example.org")
	album := ts.NewAlbum(t, alice.Access)
	up := ts.OpenUpload(t, alice.Access, album)
	data := randomData(3<<20 + 5)

	r := ts.Do(t, Req{Method: "POST", Path: "/v1/uploads/" + up + "/tus", Token: alice.Access,
		Header: tusHeaders("Upload-Length", strconv.Itoa(len(data)), "Upload-Metadata", "filename ZmlsZS5tcDQ=,hash "+base64.StdEncoding.EncodeToString([]byte(servertest.HashOf(data)))+",empty")})
	r.WantStatus(t, http.StatusCreated)
	loc := r.Header.Get("Location")
	if !strings.HasPrefix(loc, "/v1/uploads/"+up+"/tus/") || len(path.Base(loc)) != 36 {
		t.Fatalf("Location %q", loc)
	}
	wantHeaders(t, r, map[string]string{"Tus-Resumable": "1.0.0", "Cache-Control": "no-store"})

	// HEAD repeats the creation's metadata (tus creation extension), but
	// only the hash pair: a file name is plaintext the server does not keep.
	r = ts.Do(t, Req{Method: "HEAD", Path: loc, Token: alice.Access, Header: tusHeaders()}).WantStatus(t, http.StatusOK)
	wantHeaders(t, r, map[string]string{"Upload-Offset": "0", "Upload-Length": strconv.Itoa(len(data)), "Cache-Control": "no-store", "Tus-Resumable": "1.0.0",
		"Upload-Metadata": "hash " + base64.StdEncoding.EncodeToString([]byte(servertest.HashOf(data)))})

	half := len(data) / 2
	r = ts.TusPatch(t, alice.Access, loc, 0, data[:half]).WantStatus(t, http.StatusNoContent)
	wantHeaders(t, r, map[string]string{"Upload-Offset": strconv.Itoa(half), "Tus-Resumable": "1.0.0"})
	if got := ts.TusHead(t, alice.Access, loc); got != half {
		t.Fatalf("HEAD after the first half: %d", got)
	}
	// An empty PATCH moves nothing.
	ts.TusPatch(t, alice.Access, loc, half, nil).WantStatus(t, http.StatusNoContent)
	if got := ts.TusHead(t, alice.Access, loc); got != half {
		t.Fatalf("HEAD after an empty PATCH: %d", got)
	}
	if _, err := ts.Blobs.Stat(servertest.HashOf(data)); err == nil {
		t.Fatal("the blob is in the store before its last byte arrived")
	}
	r = ts.TusPatch(t, alice.Access, loc, half, data[half:]).WantStatus(t, http.StatusNoContent)
	wantHeaders(t, r, map[string]string{"Upload-Offset": strconv.Itoa(len(data))})

	ts.wantStored(t, data)
	user := ts.UserID(t, alice.Access)
	if held, _ := ts.Store.Holds(user, servertest.HashOf(data)); !held {
		t.Fatal("the uploader does not hold the blob")
	}
	if hashes, _ := ts.Store.UploadBlobs(user, up); !slices.Equal(hashes, []string{servertest.HashOf(data)}) {
		t.Fatalf("the session's hash set: %q", hashes)
	}
	// The transfer is gone, its partial file with it; the session stays open.
	ts.Do(t, Req{Method: "HEAD", Path: loc, Token: alice.Access, Header: tusHeaders()}).WantStatus(t, http.StatusNotFound)
	if files := blobFiles(t, ts); len(files) != 1 {
		t.Fatalf("files after completion: %q", files)
	}
	if n, _ := ts.Store.InFlight(album); n != 1 {
		t.Fatalf("in flight: %d", n)
	}
	// The same bytes again through PUT: already held.
	ts.PutBlob(t, alice.Access, up, data).WantStatus(t, http.StatusOK)
}

func TestTusEmptyUpload(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	up := ts.OpenUpload(t, tok.Access, ts.NewAlbum(t, tok.Access))
	// An empty upload is complete once created: tus clients send no PATCH.
	ts.TusCreate(t, tok.Access, up, nil)
	ts.wantStored(t, nil)
	if held, _ := ts.Store.Holds(ts.UserID(t, tok.Access), servertest.HashOf(nil)); !held {
		t.Fatal("the empty blob is not held")
	}
	ts.Do(t, Req{Method: "POST", Path: "/v1/uploads/" + up + "/tus", Token: tok.Access,
		Header: tusHeaders("Upload-Length", "0", "Upload-Metadata", tusMetadata(servertest.HashOf([]byte("x"))))}).
		WantProblem(t, http.StatusUnprocessableEntity, "error.blob.hash_mismatch")
}

func TestTusVersionRequired(t *testing.T) {
	ts, tok, loc, data := openTransfer(t, []byte("some bytes"))
	for _, version := range []string{"", "0.2.2", "1.0"} {
		for _, req := range []Req{
			{Method: "POST", Path: path.Dir(loc), Header: map[string]string{"Upload-Length": "10", "Upload-Metadata": tusMetadata(servertest.HashOf(data))}},
			{Method: "HEAD", Path: loc},
			{Method: "PATCH", Path: loc, Body: data, ContentType: "application/offset+octet-stream", Header: map[string]string{"Upload-Offset": "0"}},
			{Method: "DELETE", Path: loc},
		} {
			t.Run(req.Method+"/"+version, func(t *testing.T) {
				req.Token = tok.Access
				if version != "" {
					req.Header = withHeader(req.Header, "Tus-Resumable", version)
				}
				r := ts.Do(t, req)
				if req.Method == "HEAD" {
					r.WantStatus(t, http.StatusPreconditionFailed)
				} else {
					r.WantProblem(t, http.StatusPreconditionFailed, "error.tus.version")
				}
				wantHeaders(t, r, map[string]string{"Tus-Version": "1.0.0", "Tus-Resumable": "1.0.0"})
			})
		}
	}
	// Nothing was taken or discarded.
	if got := ts.TusHead(t, tok.Access, loc); got != 0 {
		t.Fatalf("offset after refused requests: %d", got)
	}
}

// withHeader returns a copy of m with k set to v.
func withHeader(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for key, val := range m {
		out[key] = val
	}
	return out
}

func TestTusCreateValidation(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.MaxBlob = 1024 })
	tok := ts.Register(t, "a@example.org")
	up := ts.OpenUpload(t, tok.Access, ts.NewAlbum(t, tok.Access))
	hash := servertest.HashOf([]byte("x"))
	good := tusMetadata(hash)
	unknown := "sbx_up_" + strings.Repeat("A", 43)
	cases := []servertest.Scenario{
		{Name: "no token", Path: "/v1/uploads/" + up + "/tus", Header: tusHeaders("Upload-Length", "1", "Upload-Metadata", good), WantStatus: 401, WantCode: "error.auth.unauthenticated"},
		{Name: "upload id malformed", Path: "/v1/uploads/sbx_up_sh~rt/tus", Token: tok.Access, Header: tusHeaders("Upload-Length", "1", "Upload-Metadata", good), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "upload id well-formed but short, unknown", Path: "/v1/uploads/sbx_up_short/tus", Token: tok.Access, Header: tusHeaders("Upload-Length", "1", "Upload-Metadata", good), WantStatus: 404, WantCode: "error.upload.not_found"},
		{Name: "unknown upload", Path: "/v1/uploads/" + unknown + "/tus", Token: tok.Access, Header: tusHeaders("Upload-Length", "1", "Upload-Metadata", good), WantStatus: 404, WantCode: "error.upload.not_found"},
		{Name: "no Upload-Length", Path: "/v1/uploads/" + up + "/tus", Token: tok.Access, Header: tusHeaders("Upload-Metadata", good), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "negative Upload-Length", Path: "/v1/uploads/" + up + "/tus", Token: tok.Access, Header: tusHeaders("Upload-Length", "-1", "Upload-Metadata", good), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "signed Upload-Length", Path: "/v1/uploads/" + up + "/tus", Token: tok.Access, Header: tusHeaders("Upload-Length", "+1", "Upload-Metadata", good), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "Upload-Length not a number", Path: "/v1/uploads/" + up + "/tus", Token: tok.Access, Header: tusHeaders("Upload-Length", "1e3", "Upload-Metadata", good), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "Upload-Length past int64", Path: "/v1/uploads/" + up + "/tus", Token: tok.Access, Header: tusHeaders("Upload-Length", "9223372036854775808", "Upload-Metadata", good), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "no Upload-Metadata", Path: "/v1/uploads/" + up + "/tus", Token: tok.Access, Header: tusHeaders("Upload-Length", "1"), WantStatus: 422, WantCode: "error.request.invalid"},
		{Name: "metadata without hash", Path: "/v1/uploads/" + up + "/tus", Token: tok.Access, Header: tusHeaders("Upload-Length", "1", "Upload-Metadata", "filename ZmlsZQ=="), WantStatus: 422, WantCode: "error.request.invalid"},
		{Name: "hash not base64", Path: "/v1/uploads/" + up + "/tus", Token: tok.Access, Header: tusHeaders("Upload-Length", "1", "Upload-Metadata", "hash !!!"), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "hash uppercase", Path: "/v1/uploads/" + up + "/tus", Token: tok.Access, Header: tusHeaders("Upload-Length", "1", "Upload-Metadata", tusMetadata(strings.ToUpper(hash))), WantStatus: 422, WantCode: "error.request.invalid"},
		{Name: "hash short", Path: "/v1/uploads/" + up + "/tus", Token: tok.Access, Header: tusHeaders("Upload-Length", "1", "Upload-Metadata", tusMetadata(hash[:63])), WantStatus: 422, WantCode: "error.request.invalid"},
	}
	for _, sc := range cases {
		sc.Method = "POST"
		t.Run(sc.Name, func(t *testing.T) { sc.Test(t, ts.Client) })
	}
	// Over --max-blob: 413 with no body, before the session is even read.
	wantEmpty413(t, ts.Do(t, Req{Method: "POST", Path: "/v1/uploads/" + up + "/tus", Token: tok.Access,
		Header: tusHeaders("Upload-Length", "1025", "Upload-Metadata", good)}))
	wantEmpty413(t, ts.Do(t, Req{Method: "POST", Path: "/v1/uploads/" + unknown + "/tus", Token: tok.Access,
		Header: tusHeaders("Upload-Length", "1025", "Upload-Metadata", good)}))
	if ids, _ := ts.Store.Transfers("", 10); len(ids) != 0 {
		t.Fatalf("refused creations recorded transfers: %q", ids)
	}
	// Exactly --max-blob is fine.
	ts.TusCreate(t, tok.Access, up, bytes.Repeat([]byte{1}, 1024))
}

func TestTusQuota(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	up := ts.OpenUpload(t, tok.Access, ts.NewAlbum(t, tok.Access))
	if err := ts.Store.SetQuota("a@example.org", 1000); err != nil {
		t.Fatal(err)
	}
	ts.PutBlob(t, tok.Access, up, bytes.Repeat([]byte{1}, 300)).WantStatus(t, http.StatusCreated)
	create := func(n int) *Response {
		return ts.Do(t, Req{Method: "POST", Path: "/v1/uploads/" + up + "/tus", Token: tok.Access,
			Header: tusHeaders("Upload-Length", strconv.Itoa(n), "Upload-Metadata", tusMetadata(servertest.HashOf(bytes.Repeat([]byte{2}, n))))})
	}
	create(701).WantProblem(t, http.StatusForbidden, "error.quota.exceeded")
	loc := create(400).WantStatus(t, http.StatusCreated).Header.Get("Location")
	// The open transfer counts whole before a byte of it arrives.
	create(301).WantProblem(t, http.StatusForbidden, "error.quota.exceeded")
	ts.Do(t, Req{Method: "DELETE", Path: loc, Token: tok.Access, Header: tusHeaders()}).WantStatus(t, http.StatusNoContent)
	create(700).WantStatus(t, http.StatusCreated)
}

func TestTusPatchValidation(t *testing.T) {
	ts, tok, loc, data := openTransfer(t, randomData(1000))
	ts.TusPatch(t, tok.Access, loc, 0, data[:100]).WantStatus(t, http.StatusNoContent)
	octet := "application/offset+octet-stream"
	cases := []servertest.Scenario{
		{Name: "no token", Path: loc, Body: data[100:200], ContentType: octet, Header: tusHeaders("Upload-Offset", "100"), WantStatus: 401, WantCode: "error.auth.unauthenticated"},
		{Name: "octet-stream", Path: loc, Token: tok.Access, Body: data[100:200], ContentType: "application/octet-stream", Header: tusHeaders("Upload-Offset", "100"), WantStatus: 415, WantCode: "error.request.unsupported_media_type"},
		{Name: "no media type", Path: loc, Token: tok.Access, Body: data[100:200], Header: tusHeaders("Content-Type", "", "Upload-Offset", "100"), WantStatus: 415, WantCode: "error.request.unsupported_media_type"},
		{Name: "no Upload-Offset", Path: loc, Token: tok.Access, Body: data[100:200], ContentType: octet, Header: tusHeaders(), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "negative Upload-Offset", Path: loc, Token: tok.Access, Body: data[100:200], ContentType: octet, Header: tusHeaders("Upload-Offset", "-100"), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "offset behind", Path: loc, Token: tok.Access, Body: data[:100], ContentType: octet, Header: tusHeaders("Upload-Offset", "0"), WantStatus: 409, WantCode: "error.transfer.offset_mismatch"},
		{Name: "offset ahead", Path: loc, Token: tok.Access, Body: data[200:300], ContentType: octet, Header: tusHeaders("Upload-Offset", "200"), WantStatus: 409, WantCode: "error.transfer.offset_mismatch"},
		{Name: "transfer id malformed", Path: path.Dir(loc) + "/not-a-uuid", Token: tok.Access, Body: data[100:200], ContentType: octet, Header: tusHeaders("Upload-Offset", "100"), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "unknown transfer", Path: path.Dir(loc) + "/9f0e0d0c-0b0a-4908-8706-050403020100", Token: tok.Access, Body: data[100:200], ContentType: octet, Header: tusHeaders("Upload-Offset", "100"), WantStatus: 404, WantCode: "error.transfer.not_found"},
	}
	for _, sc := range cases {
		sc.Method = "PATCH"
		t.Run(sc.Name, func(t *testing.T) { sc.Test(t, ts.Client) })
	}
	// A body past the declared length: announced, refused before a byte is
	// read; chunked, refused when it overruns, acknowledging nothing of it.
	wantEmpty413(t, ts.TusPatch(t, tok.Access, loc, 100, append(slices.Clone(data[100:]), 0)))
	req, _ := http.NewRequest("PATCH", ts.URL()+loc, io.MultiReader(bytes.NewReader(data[100:]), strings.NewReader("x")))
	req.Header.Set("Authorization", "Bearer "+tok.Access)
	req.Header.Set("Content-Type", octet)
	req.Header.Set("Tus-Resumable", "1.0.0")
	req.Header.Set("Upload-Offset", "100")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantEmpty413(t, &Response{Status: resp.StatusCode, Header: resp.Header, Body: body})
	if got := ts.TusHead(t, tok.Access, loc); got != 100 {
		t.Fatalf("offset after refused PATCHes: %d, want 100", got)
	}
	// The transfer still completes from the acknowledged offset.
	ts.TusPatch(t, tok.Access, loc, 100, data[100:]).WantStatus(t, http.StatusNoContent)
	ts.wantStored(t, data)
}

func TestTusForeignAccount(t *testing.T) {
	ts := MustOpenServer(t)
	alice := ts.Register(t, "alice@example.org")
	bob := ts.Register(t, "bob@example.org")
	aliceUp := ts.OpenUpload(t, alice.Access, ts.NewAlbum(t, alice.Access))
	bobUp := ts.OpenUpload(t, bob.Access, ts.NewAlbum(t, bob.Access))
	data := randomData(100)
	loc := ts.TusCreate(t, alice.Access, aliceUp, data)
	// Bob naming Alice's session, and Bob naming Alice's transfer under his
	// own session: both answer as unknown ones.
	bobLoc := "/v1/uploads/" + bobUp + "/tus/" + path.Base(loc)
	for _, tc := range []struct{ path, code string }{{loc, "error.upload.not_found"}, {bobLoc, "error.transfer.not_found"}} {
		ts.Do(t, Req{Method: "HEAD", Path: tc.path, Token: bob.Access, Header: tusHeaders()}).WantStatus(t, http.StatusNotFound)
		ts.TusPatch(t, bob.Access, tc.path, 0, data).WantProblem(t, http.StatusNotFound, tc.code)
		ts.Do(t, Req{Method: "DELETE", Path: tc.path, Token: bob.Access, Header: tusHeaders()}).WantProblem(t, http.StatusNotFound, tc.code)
	}
	ts.Do(t, Req{Method: "POST", Path: "/v1/uploads/" + aliceUp + "/tus", Token: bob.Access,
		Header: tusHeaders("Upload-Length", "100", "Upload-Metadata", tusMetadata(servertest.HashOf(data)))}).WantProblem(t, http.StatusNotFound, "error.upload.not_found")
	if files := blobFiles(t, ts); len(files) != 0 {
		t.Fatalf("refused requests wrote files: %q", files)
	}
	// Alice's transfer is untouched.
	ts.TusPatch(t, alice.Access, loc, 0, data).WantStatus(t, http.StatusNoContent)
	ts.wantStored(t, data)
}

// TestTusForeignAccountOnBusyTransfer: while Alice's transfer is being
// written (its lease held), Bob naming it learns nothing more than for an
// idle one: 404, not the 423 that would tell him the id is live.
func TestTusForeignAccountOnBusyTransfer(t *testing.T) {
	ts := MustOpenServer(t)
	alice := ts.Register(t, "alice@example.org")
	bob := ts.Register(t, "bob@example.org")
	aliceUp := ts.OpenUpload(t, alice.Access, ts.NewAlbum(t, alice.Access))
	bobUp := ts.OpenUpload(t, bob.Access, ts.NewAlbum(t, bob.Access))
	data := randomData(100)
	loc := ts.TusCreate(t, alice.Access, aliceUp, data)
	if held, err := ts.Store.TryLease("tus/"+path.Base(loc), "alice-writer", time.Minute); err != nil || !held {
		t.Fatalf("Alice's writer's lease: %v %v", held, err)
	}
	bobLoc := "/v1/uploads/" + bobUp + "/tus/" + path.Base(loc)
	for _, tc := range []struct{ path, code string }{{loc, "error.upload.not_found"}, {bobLoc, "error.transfer.not_found"}} {
		ts.TusPatch(t, bob.Access, tc.path, 0, data).WantProblem(t, http.StatusNotFound, tc.code)
		ts.Do(t, Req{Method: "DELETE", Path: tc.path, Token: bob.Access, Header: tusHeaders()}).WantProblem(t, http.StatusNotFound, tc.code)
	}
	// Alice herself is told to retry.
	ts.TusPatch(t, alice.Access, loc, 0, data).WantProblem(t, http.StatusLocked, "error.transfer.locked")
}

func TestTusHashMismatchStoresNothing(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	up := ts.OpenUpload(t, tok.Access, ts.NewAlbum(t, tok.Access))
	meant := randomData(2000)
	arrived := slices.Clone(meant)
	arrived[1500] ^= 1
	loc := ts.TusCreate(t, tok.Access, up, meant)
	ts.TusPatch(t, tok.Access, loc, 0, arrived[:1000]).WantStatus(t, http.StatusNoContent)
	ts.TusPatch(t, tok.Access, loc, 1000, arrived[1000:]).WantProblem(t, http.StatusUnprocessableEntity, "error.blob.hash_mismatch")
	ts.Do(t, Req{Method: "HEAD", Path: loc, Token: tok.Access, Header: tusHeaders()}).WantStatus(t, http.StatusNotFound)
	if files := blobFiles(t, ts); len(files) != 0 {
		t.Fatalf("a refused transfer left files: %q", files)
	}
	user := ts.UserID(t, tok.Access)
	for _, h := range []string{servertest.HashOf(meant), servertest.HashOf(arrived)} {
		if held, _ := ts.Store.Holds(user, h); held {
			t.Fatal("a refused transfer's blob is held")
		}
	}
	if got, _ := ts.Store.Blobs("", 10); len(got) != 0 {
		t.Fatalf("blob records after a refused transfer: %v", got)
	}
}

func TestTusTermination(t *testing.T) {
	ts, tok, loc, data := openTransfer(t, randomData(500))
	ts.TusPatch(t, tok.Access, loc, 0, data[:200]).WantStatus(t, http.StatusNoContent)
	if _, err := os.Stat(ts.partialPath(t, loc)); err != nil {
		t.Fatalf("no partial file: %v", err)
	}
	r := ts.Do(t, Req{Method: "DELETE", Path: loc, Token: tok.Access, Header: tusHeaders()}).WantStatus(t, http.StatusNoContent)
	wantHeaders(t, r, map[string]string{"Tus-Resumable": "1.0.0"})
	ts.Do(t, Req{Method: "HEAD", Path: loc, Token: tok.Access, Header: tusHeaders()}).WantStatus(t, http.StatusNotFound)
	ts.Do(t, Req{Method: "DELETE", Path: loc, Token: tok.Access, Header: tusHeaders()}).WantProblem(t, http.StatusNotFound, "error.transfer.not_found")
	if files := blobFiles(t, ts); len(files) != 0 {
		t.Fatalf("files after termination: %q", files)
	}
	if removals, _ := ts.Store.TransferRemovals(10); len(removals) != 0 {
		t.Fatalf("removal queue: %q", removals)
	}
	// Closing the session discards the transfers it still has.
	up := path.Base(path.Dir(path.Dir(loc))) // /v1/uploads/{up}/tus/{id}
	loc = ts.TusCreate(t, tok.Access, up, data)
	ts.TusPatch(t, tok.Access, loc, 0, data[:200]).WantStatus(t, http.StatusNoContent)
	ts.Do(t, Req{Method: "DELETE", Path: "/v1/uploads/" + up, Token: tok.Access}).WantStatus(t, http.StatusNoContent)
	if files := blobFiles(t, ts); len(files) != 0 {
		t.Fatalf("files after closing the session: %q", files)
	}
}

func TestTusExpiry(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.AccessTTL = 24 * time.Hour })
	// The maintenance runner cli starts beside the server, ticking in real
	// time.
	ctx, stop := context.WithCancel(context.Background())
	runner := maintenance.New(ts.Store, ts.Blobs, maintenance.Options{Interval: 10 * time.Millisecond, Holder: "node/run"})
	done := make(chan struct{})
	go func() { defer close(done); runner.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	tok := ts.Register(t, "a@example.org")
	album := ts.NewAlbum(t, tok.Access)
	up := ts.OpenUpload(t, tok.Access, album)
	data := randomData(300)
	loc := ts.TusCreate(t, tok.Access, up, data)
	// Each PATCH keeps the session, and so the transfer, open for an hour.
	for i := range 3 {
		ts.Clock.Advance(59 * time.Minute)
		ts.TusPatch(t, tok.Access, loc, i*100, data[i*100:i*100+50]).WantStatus(t, http.StatusNoContent)
		ts.Clock.Advance(59 * time.Minute)
		ts.TusPatch(t, tok.Access, loc, i*100+50, data[i*100+50:i*100+100]).WantStatus(t, http.StatusNoContent)
		if n, _ := ts.Store.InFlight(album); n != 1 {
			t.Fatalf("in flight while the transfer is written: %d", n)
		}
	}
	ts.wantStored(t, data)

	loc = ts.TusCreate(t, tok.Access, up, data)
	ts.TusPatch(t, tok.Access, loc, 0, data[:100]).WantStatus(t, http.StatusNoContent)
	ts.Clock.Advance(time.Hour)
	if n, _ := ts.Store.InFlight(album); n != 0 {
		t.Fatalf("in flight after an idle hour: %d", n)
	}
	ts.Do(t, Req{Method: "HEAD", Path: loc, Token: tok.Access, Header: tusHeaders()}).WantStatus(t, http.StatusNotFound)
	ts.TusPatch(t, tok.Access, loc, 100, data[100:]).WantProblem(t, http.StatusNotFound, "error.upload.not_found")
	// The sweeper, ticking in real time, removes the expired partial file.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(ts.partialPath(t, loc)); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sweeper left the partial file of an expired transfer")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTusBrokenPatchAcknowledgesWhatArrived cuts a PATCH off mid-body: the
// bytes that reached the server are acknowledged, a second writer meanwhile
// is told to retry (423), and the client resumes from the offset HEAD gives.
func TestTusBrokenPatchAcknowledgesWhatArrived(t *testing.T) {
	ts, tok, loc, data := openTransfer(t, randomData(4<<20))

	pr, pw := io.Pipe()
	req, _ := http.NewRequestWithContext(context.Background(), "PATCH", ts.URL()+loc, pr)
	req.Header.Set("Authorization", "Bearer "+tok.Access)
	req.Header.Set("Content-Type", "application/offset+octet-stream")
	req.Header.Set("Tus-Resumable", "1.0.0")
	req.Header.Set("Upload-Offset", "0")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	if _, err := pw.Write(data[:1<<20]); err != nil {
		t.Fatal(err)
	}
	// Once the first PATCH is writing, a second one is refused.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if fi, err := os.Stat(ts.partialPath(t, loc)); err == nil && fi.Size() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first PATCH never wrote")
		}
		time.Sleep(time.Millisecond)
	}
	ts.TusPatch(t, tok.Access, loc, 0, nil).WantProblem(t, http.StatusLocked, "error.transfer.locked")
	pw.CloseWithError(io.ErrClosedPipe)
	<-done
	// Wait for the server to notice and acknowledge what it got.
	var offset int
	for {
		r := ts.TusPatch(t, tok.Access, loc, ts.TusHead(t, tok.Access, loc), nil)
		if r.Status == http.StatusNoContent {
			offset, _ = strconv.Atoi(r.Header.Get("Upload-Offset"))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the broken PATCH still holds the transfer: %d", r.Status)
		}
	}
	if offset <= 0 || offset > 1<<20 {
		t.Fatalf("acknowledged %d bytes of the 1 MiB sent", offset)
	}
	t.Logf("acknowledged %d of the %d bytes sent before the cut", offset, 1<<20)
	ts.TusPatch(t, tok.Access, loc, offset, data[offset:]).WantStatus(t, http.StatusNoContent)
	ts.wantStored(t, data)
}

// TestTusResumeAfterRestart stops the server mid-transfer, leaves bytes in
// the partial file that were never acknowledged (as a crash between write and
// record does), and resumes on a new server over the same data.
func TestTusResumeAfterRestart(t *testing.T) {
	dir := t.TempDir()
	ts := MustOpenServerIn(t, dir)
	tok := ts.Register(t, "a@example.org")
	up := ts.OpenUpload(t, tok.Access, ts.NewAlbum(t, tok.Access))
	data := randomData(2<<20 + 7)
	loc := ts.TusCreate(t, tok.Access, up, data)
	acked := 1<<20 + 3
	ts.TusPatch(t, tok.Access, loc, 0, data[:acked]).WantStatus(t, http.StatusNoContent)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ts.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ts.Store.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(ts.partialPath(t, loc), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("bytes the server never acknowledged"))
	f.Close()

	ts = MustOpenServerIn(t, dir)
	if got := ts.TusHead(t, tok.Access, loc); got != acked {
		t.Fatalf("HEAD after the restart: %d, want %d", got, acked)
	}
	r := ts.Do(t, Req{Method: "HEAD", Path: loc, Token: tok.Access, Header: tusHeaders()}).WantStatus(t, http.StatusOK)
	wantHeaders(t, r, map[string]string{"Upload-Metadata": tusMetadata(servertest.HashOf(data))})
	ts.TusPatch(t, tok.Access, loc, acked, data[acked:acked+1000]).WantStatus(t, http.StatusNoContent)
	ts.TusPatch(t, tok.Access, loc, acked+1000, data[acked+1000:]).WantStatus(t, http.StatusNoContent)
	ts.wantStored(t, data)
	if files := blobFiles(t, ts); len(files) != 1 {
		t.Fatalf("files after completion: %q", files)
	}
}

// TestTusLostPartialFile: the store can outlive a partial file (a backup
// restores the database but not partial files, or the disk lost them). Such
// a transfer cannot resume, so HEAD and PATCH answer 404, which makes a tus
// client start a new upload, and the transfer is gone; the session still
// takes new transfers.
func TestTusLostPartialFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(path string) error
	}{
		{"missing", os.Remove},
		{"truncated", func(path string) error { return os.Truncate(path, 100) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := MustOpenServer(t)
			tok := ts.Register(t, "a@example.org")
			up := ts.OpenUpload(t, tok.Access, ts.NewAlbum(t, tok.Access))
			data := randomData(1000)
			// lost opens a transfer, writes 400 bytes, and loses its
			// partial file; gone then wants the transfer refused again,
			// its file and its record gone.
			lost := func(tb testing.TB, sc *servertest.Scenario) {
				loc := ts.TusCreate(tb, tok.Access, up, data)
				ts.TusPatch(tb, tok.Access, loc, 0, data[:400]).WantStatus(tb, http.StatusNoContent)
				if err := tc.lose(ts.partialPath(tb, loc)); err != nil {
					tb.Fatal(err)
				}
				sc.Path = loc
			}
			gone := func(tb testing.TB, sc servertest.Scenario, _ *Response) {
				ts.TusPatch(tb, tok.Access, sc.Path, 400, data[400:]).WantProblem(tb, http.StatusNotFound, "error.transfer.not_found")
				if _, err := os.Stat(ts.partialPath(tb, sc.Path)); !os.IsNotExist(err) {
					tb.Fatalf("%s: the lost transfer's partial file remains: %v", sc.Method, err)
				}
				if ids, _ := ts.Store.Transfers("", 10); len(ids) != 0 {
					tb.Fatalf("%s: the lost transfer is still recorded: %q", sc.Method, ids)
				}
			}
			for _, sc := range []servertest.Scenario{
				{Name: "HEAD", Method: "HEAD", Token: tok.Access, Header: tusHeaders(), WantStatus: http.StatusNotFound,
					Setup: lost, Teardown: func(tb testing.TB, sc servertest.Scenario, r *Response) {
						wantHeaders(tb, r, map[string]string{"Tus-Resumable": "1.0.0", "Content-Type": "application/problem+json"})
						gone(tb, sc, r)
					}},
				{Name: "PATCH", Method: "PATCH", Token: tok.Access, Body: data[400:], ContentType: "application/offset+octet-stream",
					Header: tusHeaders("Upload-Offset", "400"), WantStatus: http.StatusNotFound, WantCode: "error.transfer.not_found",
					Setup: lost, Teardown: gone},
			} {
				sc.Test(t, ts.Client)
			}
			if removals, _ := ts.Store.TransferRemovals(10); len(removals) != 0 {
				t.Fatalf("removal queue: %q", removals)
			}
			loc := ts.TusCreate(t, tok.Access, up, data)
			ts.TusPatch(t, tok.Access, loc, 0, data).WantStatus(t, http.StatusNoContent)
			ts.wantStored(t, data)
		})
	}
}

// randomData returns n pseudo-random bytes, different on every call.
func randomData(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// secondNode starts another server on the test server's store and blob
// storage, with a blob engine of its own (on S3, another client of the same
// bucket): a second node, as far as the blobs are concerned.
func (ts *TestServer) secondNode(tb testing.TB) *TestServer {
	tb.Helper()
	blobStore := servertest.MustOpenBlobs(tb, ts.Dir, nil)
	srv := server.New(ts.Config, ts.Store, blobStore)
	if err := srv.Open("127.0.0.1:0"); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { srv.Close(context.Background()) })
	return &TestServer{ts.Node(srv, ts.Store, blobStore)}
}

// TestTusAlternatesNodes: a transfer whose PATCHes alternate between two
// servers sharing the store and the blob storage completes, each PATCH
// resuming from what the other acknowledged (on S3: across a part boundary,
// from staged bytes and from parts), so nothing about a transfer lives only
// in one process.
func TestTusAlternatesNodes(t *testing.T) {
	ts, tok, loc, data := openTransfer(t, randomData(13<<20+7))
	nodes := []*TestServer{ts, ts.secondNode(t)}
	off := 0
	for i, end := range []int{3 << 20, 6 << 20, 6<<20 + 1, 9<<20 + 5, len(data)} {
		node := nodes[i%2]
		if got := node.TusHead(t, tok.Access, loc); got != off {
			t.Fatalf("node %d: HEAD answers offset %d, want %d", i%2, got, off)
		}
		node.TusPatch(t, tok.Access, loc, off, data[off:end]).WantStatus(t, http.StatusNoContent)
		off = end
	}
	nodes[1].wantStored(t, data)
	if files := blobFiles(t, ts); len(files) != 1 {
		t.Fatalf("files after completion: %q", files)
	}
}
