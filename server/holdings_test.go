package server_test

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"sealbox/kv/fault"
	"sealbox/server/servertest"
)

// TestHeldBlobRead: an account reads back a blob it holds, inline (under
// --inline-max) or a file of the blob engine alike: whole, as a range, its
// headers alone (HEAD), and revalidated (304), with a share read's headers.
// A hash nobody stored, another account's blob and a malformed hash are
// refused; the first two with the same 404 body, so a read reveals nothing
// of other accounts. Without a token: 401.
func TestHeldBlobRead(t *testing.T) {
	ts := MustOpenServer(t)
	alice := ts.Register(t, "alice@example.org")
	bob := ts.Register(t, "bob@example.org")
	small := []byte("a small sealed thumbnail")
	large := bytes.Repeat([]byte("sealed original "), 4096) // 64 KiB, over --inline-max
	for _, data := range [][]byte{small, large} {
		hash := ts.Upload(t, alice.Access, data)
		path := "/v1/blobs/" + hash
		r := ts.Do(t, Req{Method: "GET", Path: path, Token: alice.Access}).WantStatus(t, http.StatusOK)
		if !bytes.Equal(r.Body, data) {
			t.Fatalf("%d bytes: the body differs from what was uploaded", len(data))
		}
		wantHeaders(t, r, map[string]string{
			"ETag": `"` + hash + `"`, "Accept-Ranges": "bytes", "Cache-Control": "private, no-cache",
			"Content-Type": "application/octet-stream", "Content-Length": strconv.Itoa(len(data)),
		})
		head := ts.Do(t, Req{Method: "HEAD", Path: path, Token: alice.Access}).WantStatus(t, http.StatusOK)
		if len(head.Body) != 0 || head.Header.Get("Content-Length") != strconv.Itoa(len(data)) {
			t.Fatalf("HEAD: %d body bytes, Content-Length %q", len(head.Body), head.Header.Get("Content-Length"))
		}
		part := ts.Do(t, Req{Method: "GET", Path: path, Token: alice.Access, Header: map[string]string{"Range": "bytes=2-9"}}).
			WantStatus(t, http.StatusPartialContent)
		if !bytes.Equal(part.Body, data[2:10]) {
			t.Fatalf("range 2-9: got %q, want %q", part.Body, data[2:10])
		}
		wantHeader(t, part, "Content-Range", "bytes 2-9/"+strconv.Itoa(len(data)))
		ts.Do(t, Req{Method: "GET", Path: path, Token: alice.Access, Header: map[string]string{"If-None-Match": `"` + hash + `"`}}).
			WantStatus(t, http.StatusNotModified)

		foreign := ts.Do(t, Req{Method: "GET", Path: path, Token: bob.Access})
		foreign.WantProblem(t, http.StatusNotFound, fault.ECodeBlobNotFound)
		unknown := ts.Do(t, Req{Method: "GET", Path: "/v1/blobs/" + servertest.HashOf([]byte("never stored")), Token: alice.Access})
		unknown.WantProblem(t, http.StatusNotFound, fault.ECodeBlobNotFound)
		if !bytes.Equal(foreign.Body, unknown.Body) {
			t.Fatalf("another account's blob and an unknown hash answer differently:\n%s\n%s", foreign.Body, unknown.Body)
		}
		ts.Do(t, Req{Method: "GET", Path: path}).WantProblem(t, http.StatusUnauthorized, fault.ECodeUnauthenticated)
	}
	ts.Do(t, Req{Method: "GET", Path: "/v1/blobs/" + strings.Repeat("A", 64), Token: alice.Access}).
		WantProblem(t, http.StatusBadRequest, fault.ECodeMalformed)
}
