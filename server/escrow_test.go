package server_test

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"sealbox/server/servertest"
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
	cases := []servertest.Scenario{
		{Name: "GET with none stored", Method: "GET", Token: tok.Access, WantStatus: 404, WantCode: "error.escrow.not_found"},
		{Name: "GET without a token", Method: "GET", WantStatus: 401, WantCode: "error.auth.unauthenticated"},
		{Name: "PUT without a token", Method: "PUT", Body: []byte{1}, ContentType: "application/octet-stream", WantStatus: 401, WantCode: "error.auth.unauthenticated"},
		{Name: "empty body", Method: "PUT", Token: tok.Access, Body: []byte{}, ContentType: "application/octet-stream", WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "no body", Method: "PUT", Token: tok.Access, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "JSON content type", Method: "PUT", Token: tok.Access, Body: []byte(`{"k":1}`), ContentType: "application/json", WantStatus: 415, WantCode: "error.request.unsupported_media_type"},
		{Name: "CBOR content type", Method: "PUT", Token: tok.Access, Body: []byte{0xa0}, ContentType: "application/cbor", WantStatus: 415, WantCode: "error.request.unsupported_media_type"},
	}
	for _, sc := range cases {
		sc.Path = "/v1/auth/escrow"
		t.Run(sc.Name, func(t *testing.T) { sc.Test(t, ts.Client) })
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
