package server_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"testing"

	"sealbox/blobs"
	"sealbox/server"
	"sealbox/server/servertest"
)

// StoredBlob returns the bytes kept of blob hash, inline in the store or as
// a file of the blob engine, and whether they are inline; it fails the test
// when neither keeps them.
func (ts *TestServer) StoredBlob(tb testing.TB, hash string) ([]byte, bool) {
	tb.Helper()
	data, err := ts.Store.InlineBlob(hash)
	if err != nil {
		tb.Fatal(err)
	}
	if data != nil {
		return data, true
	}
	f, _, err := ts.Blobs.Open(hash)
	if err != nil {
		tb.Fatalf("blob %s is stored neither inline nor as a file: %v", hash, err)
	}
	defer f.Close()
	data, err = io.ReadAll(f)
	if err != nil {
		tb.Fatal(err)
	}
	return data, false
}

// hasFile reports whether the blob engine keeps a file of hash.
func (ts *TestServer) hasFile(tb testing.TB, hash string) bool {
	tb.Helper()
	_, err := ts.Blobs.Stat(hash)
	if err != nil && !errors.Is(err, blobs.ErrNotFound) {
		tb.Fatal(err)
	}
	return err == nil
}

// TestOpBlobsInline: an op's manifest and metadata blob of at most
// --inline-max bytes are kept inline by the transaction that applies the
// op, and the blob engine gets no file of them; with --inline-max 0 both
// are files, as before. The caller holds them and is charged their sizes
// either way.
func TestOpBlobsInline(t *testing.T) {
	for _, tc := range []struct {
		name      string
		inlineMax int64
		inline    bool
	}{{"default", server.DefaultConfig().InlineMax, true}, {"off", 0, false}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newOpFixture(t, func(c *server.Config) { c.InlineMax = tc.inlineMax })
			before, _ := f.ts.Store.HeldBytes(f.userID)
			body := f.createBody(assetA)
			f.op(t, body).WantStatus(t, http.StatusOK)
			var added int64
			for _, field := range []string{"manifest_cbor", "metadata_blob"} {
				raw, _ := base64.StdEncoding.DecodeString(body[field].(string))
				added += int64(len(raw))
				data, inline := f.ts.StoredBlob(t, servertest.HashOf(raw))
				if !bytes.Equal(data, raw) || inline != tc.inline {
					t.Fatalf("%s: stored %q inline %v, want %q inline %v", field, data, inline, raw, tc.inline)
				}
				if got := f.ts.hasFile(t, servertest.HashOf(raw)); got == tc.inline {
					t.Fatalf("%s: a file kept %v with inline %v", field, got, tc.inline)
				}
				if held, _ := f.ts.Store.Holds(f.userID, servertest.HashOf(raw)); !held {
					t.Fatalf("%s: not held by the caller", field)
				}
			}
			if after, _ := f.ts.Store.HeldBytes(f.userID); after-before != added {
				t.Fatalf("the op charged %d bytes, want %d", after-before, added)
			}
		})
	}
}

// TestBlobPutInline: a blob PUT of at most --inline-max bytes, with or
// without a Content-Length, is kept inline and writes no file; one byte
// more is a file; a small body that does not hash to its path is refused
// with nothing kept; a small body past the quota is refused too.
func TestBlobPutInline(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.InlineMax = 64 })
	tok := ts.Register(t, "a@example.org")
	up := ts.OpenUpload(t, tok.Access, ts.NewAlbum(t, tok.Access))
	for _, tc := range []struct {
		name    string
		data    []byte
		chunked bool
		inline  bool
	}{
		{"at the threshold", bytes.Repeat([]byte{1}, 64), false, true},
		{"chunked", bytes.Repeat([]byte{2}, 10), true, true},
		{"one byte more", bytes.Repeat([]byte{3}, 65), false, false},
		{"one byte more, chunked", bytes.Repeat([]byte{4}, 65), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.chunked {
				ts.PutBlobChunked(t, tok.Access, up, tc.data, "application/octet-stream").WantStatus(t, http.StatusCreated)
			} else {
				ts.PutBlob(t, tok.Access, up, tc.data).WantStatus(t, http.StatusCreated)
			}
			data, inline := ts.StoredBlob(t, servertest.HashOf(tc.data))
			if !bytes.Equal(data, tc.data) || inline != tc.inline || ts.hasFile(t, servertest.HashOf(tc.data)) == tc.inline {
				t.Fatalf("stored %d bytes inline %v, file %v; want inline %v", len(data), inline, ts.hasFile(t, servertest.HashOf(tc.data)), tc.inline)
			}
		})
	}
	claimed := servertest.HashOf([]byte("meant"))
	ts.Do(t, Req{Method: "PUT", Path: "/v1/uploads/" + up + "/blobs/" + claimed, Token: tok.Access,
		Body: []byte("arrived"), ContentType: "application/octet-stream"}).WantProblem(t, http.StatusUnprocessableEntity, "error.blob.hash_mismatch")
	for _, h := range []string{claimed, servertest.HashOf([]byte("arrived"))} {
		if data, _ := ts.Store.InlineBlob(h); data != nil || ts.hasFile(t, h) {
			t.Fatalf("a refused blob was kept: %s", h)
		}
	}
	used, _ := ts.Store.HeldBytes(ts.UserID(t, tok.Access))
	if err := ts.Store.SetQuota("a@example.org", used+5); err != nil {
		t.Fatal(err)
	}
	over := []byte("six by")
	ts.PutBlobChunked(t, tok.Access, up, over, "application/octet-stream").WantProblem(t, http.StatusForbidden, "error.quota.exceeded")
	if data, _ := ts.Store.InlineBlob(servertest.HashOf(over)); data != nil {
		t.Fatal("a blob past the quota was kept inline")
	}
}

// TestShareBlobBothKindsAlike: a share link serves an inline blob exactly
// as it serves a file: the same status, headers and bytes for a whole
// read, a range, a multi-range, a conditional and a HEAD.
func TestShareBlobBothKindsAlike(t *testing.T) {
	reads := []Req{
		{Method: "GET"},
		{Method: "GET", Header: map[string]string{"Range": "bytes=10-19"}},
		{Method: "GET", Header: map[string]string{"Range": "bytes=-5"}},
		{Method: "HEAD"},
	}
	var answers [2][]*Response
	for i, inlineMax := range []int64{0, server.DefaultConfig().InlineMax} {
		ts := MustOpenServer(t, func(c *server.Config) { c.InlineMax = inlineMax })
		tok := ts.Register(t, "alice@example.org")
		l := ts.newLink(t, tok.Access)
		hash := servertest.HashOf(l.content)
		if _, inline := ts.StoredBlob(t, hash); inline != (inlineMax > 0) {
			t.Fatalf("--inline-max %d: the content is inline %v", inlineMax, inline)
		}
		etag := ""
		for _, req := range append(reads, Req{Method: "GET", Header: map[string]string{"If-None-Match": `"` + hash + `"`}}) {
			req.Path = "/s/" + l.id + "/blob/" + hash
			r := ts.Do(t, req)
			answers[i] = append(answers[i], r)
			if etag == "" {
				etag = r.Header.Get("ETag")
			}
		}
		if etag != `"`+hash+`"` {
			t.Fatalf("--inline-max %d: ETag %q", inlineMax, etag)
		}
	}
	for j := range answers[0] {
		file, inline := answers[0][j], answers[1][j]
		if file.Status != inline.Status || !bytes.Equal(file.Body, inline.Body) {
			t.Fatalf("read %d: a file answers %d (%d bytes), an inline blob %d (%d bytes)", j, file.Status, len(file.Body), inline.Status, len(inline.Body))
		}
		for _, h := range []string{"Content-Length", "Content-Range", "ETag", "Last-Modified", "Accept-Ranges", "Content-Type", "Cache-Control"} {
			if a, b := file.Header.Get(h), inline.Header.Get(h); a != b {
				t.Fatalf("read %d: %s is %q for a file, %q inline", j, h, a, b)
			}
		}
	}
	if answers[1][0].Status != http.StatusOK || answers[1][1].Status != http.StatusPartialContent || answers[1][4].Status != http.StatusNotModified {
		t.Fatalf("inline statuses: %d %d %d", answers[1][0].Status, answers[1][1].Status, answers[1][4].Status)
	}
}

// movingBlobs is a node's blob engine on which another node's start moves
// small blob files inline (kv.Store.MoveInline) just as this node opens a
// file: after this node read the blob's record, before the file opened.
type movingBlobs struct {
	blobs.Engine
	move func()
}

func (m movingBlobs) OpenSized(hash string, size int64) (io.ReadSeekCloser, error) {
	m.move()
	return m.Engine.OpenSized(hash, size)
}

// TestShareReadOfABlobMovedMeanwhile: a share read whose blob another node
// moves inline between the read of its record (a file) and the open of the
// file answers the blob from its new place, not a 500. A local file is
// found gone at its open; an S3 object (SEALBOX_TEST_S3) only at its first
// read, after the answer's header is out.
func TestShareReadOfABlobMovedMeanwhile(t *testing.T) {
	for _, tc := range []struct {
		servertest.Scenario
		part func(content []byte) []byte
	}{
		{servertest.Scenario{Name: "whole", WantStatus: http.StatusOK}, func(c []byte) []byte { return c }},
		{servertest.Scenario{Name: "range", Header: map[string]string{"Range": "bytes=5-9"}, WantStatus: http.StatusPartialContent}, func(c []byte) []byte { return c[5:10] }},
	} {
		t.Run(tc.Name, func(t *testing.T) {
			ts := MustOpenServer(t, func(c *server.Config) { c.InlineMax = 0 })
			tok := ts.Register(t, "alice@example.org")
			l := ts.newLink(t, tok.Access)
			hash := servertest.HashOf(l.content)
			if _, inline := ts.StoredBlob(t, hash); inline {
				t.Fatal("the content is inline before the move")
			}
			moved := 0
			node := server.New(ts.Config, ts.Store, movingBlobs{Engine: ts.Blobs, move: func() {
				n, err := ts.Store.MoveInline(blobs.WholeFiles{Engine: ts.Blobs}, server.DefaultConfig().InlineMax)
				if err != nil {
					t.Error(err)
				}
				moved += n
			}})
			if err := node.Open("127.0.0.1:0"); err != nil {
				t.Fatal(err)
			}
			defer node.Close(t.Context())
			b := &TestServer{ts.Node(node, ts.Store, ts.Blobs)}
			sc := tc.Scenario
			sc.Method, sc.Path = "GET", "/s/"+l.id+"/blob/"+hash
			sc.Teardown = func(tb testing.TB, _ servertest.Scenario, r *Response) {
				if !bytes.Equal(r.Body, tc.part(l.content)) {
					tb.Fatalf("read during the move: %d %q", r.Status, r.Body)
				}
			}
			sc.Test(t, b.Client)
			if data, inline := ts.StoredBlob(t, hash); !inline || !bytes.Equal(data, l.content) || moved == 0 {
				t.Fatalf("the move did not happen during the read: inline %v, %d moved", inline, moved)
			}
		})
	}
}
