package server_test

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"
)

// randomBinary returns n reproducible random bytes that include zero bytes,
// so a round trip through a text or C-string path would show.
func randomBinary(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	b[0], b[n/2], b[n-1] = 0, 0, 0
	return b
}

func TestEscrowRoundTripAndReplace(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	other := ts.Register(t, "b@example.org")
	first := randomBinary(64<<10, 1)
	second := randomBinary(333, 2)

	r := ts.Do(t, Req{Method: "PUT", Path: "/v1/auth/escrow", Token: tok.Access, Body: first, ContentType: "application/octet-stream"}).WantStatus(t, 200)
	if m := r.JSON(t); m["replaced"] != false || m["stored_at"] != "2026-11-22T10:00:00Z" {
		t.Fatalf("first PUT: %s", r.Body)
	}
	got := ts.Do(t, Req{Method: "GET", Path: "/v1/auth/escrow", Token: tok.Access}).WantStatus(t, 200)
	if !bytes.Equal(got.Body, first) {
		t.Fatalf("GET: got %d bytes, not the %d stored", len(got.Body), len(first))
	}
	if ct, cc := got.Header.Get("Content-Type"), got.Header.Get("Cache-Control"); ct != "application/octet-stream" || cc != "no-store" {
		t.Fatalf("GET headers: Content-Type %q, Cache-Control %q", ct, cc)
	}

	ts.Clock.Advance(time.Minute)
	r = ts.Do(t, Req{Method: "PUT", Path: "/v1/auth/escrow", Token: tok.Access, Body: second, ContentType: "application/octet-stream"}).WantStatus(t, 200)
	if m := r.JSON(t); m["replaced"] != true || m["stored_at"] != "2026-11-22T10:01:00Z" {
		t.Fatalf("second PUT: %s", r.Body)
	}
	if got := ts.Do(t, Req{Method: "GET", Path: "/v1/auth/escrow", Token: tok.Access}).WantStatus(t, 200); !bytes.Equal(got.Body, second) {
		t.Fatal("GET after replace does not answer the new escrow")
	}
	// Another account's escrow is its own: none stored.
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/escrow", Token: other.Access}).WantProblem(t, 404, "error.escrow.not_found")
}

func TestEscrowRefusals(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	cases := []struct {
		name        string
		method      string
		token       string
		body        any
		contentType string
		status      int
		code        string
	}{
		{"GET with none stored", "GET", tok.Access, nil, "", 404, "error.escrow.not_found"},
		{"GET without a token", "GET", "", nil, "", 401, "error.auth.unauthenticated"},
		{"PUT without a token", "PUT", "", []byte{1}, "application/octet-stream", 401, "error.auth.unauthenticated"},
		{"empty body", "PUT", tok.Access, []byte{}, "application/octet-stream", 400, "error.request.malformed"},
		{"no body", "PUT", tok.Access, nil, "", 400, "error.request.malformed"},
		{"JSON content type", "PUT", tok.Access, []byte(`{"k":1}`), "application/json", 415, "error.request.unsupported_media_type"},
		{"CBOR content type", "PUT", tok.Access, []byte{0xa0}, "application/cbor", 415, "error.request.unsupported_media_type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts.Do(t, Req{Method: tc.method, Path: "/v1/auth/escrow", Token: tc.token, Body: tc.body, ContentType: tc.contentType}).WantProblem(t, tc.status, tc.code)
		})
	}
	// One byte over 64 KiB: 413 with no body, with and without Content-Length.
	over := randomBinary(64<<10+1, 3)
	r := ts.Do(t, Req{Method: "PUT", Path: "/v1/auth/escrow", Token: tok.Access, Body: over, ContentType: "application/octet-stream"})
	if r.Status != 413 || len(r.Body) != 0 {
		t.Fatalf("over the limit: got %d with %d body bytes, want 413 with none", r.Status, len(r.Body))
	}
	pr, pw := io.Pipe()
	go func() {
		pw.Write(over)
		pw.Close()
	}()
	req, _ := http.NewRequest("PUT", ts.URL()+"/v1/auth/escrow", pr)
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Authorization", "Bearer "+tok.Access)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 || resp.ContentLength != 0 {
		t.Fatalf("chunked over the limit: got %d (Content-Length %d)", resp.StatusCode, resp.ContentLength)
	}
	// Nothing was stored by the refusals.
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/escrow", Token: tok.Access}).WantProblem(t, 404, "error.escrow.not_found")
	// A single byte is a valid escrow.
	ts.Do(t, Req{Method: "PUT", Path: "/v1/auth/escrow", Token: tok.Access, Body: strings.Repeat("\x00", 1), ContentType: "application/octet-stream"}).WantStatus(t, 200)
}
