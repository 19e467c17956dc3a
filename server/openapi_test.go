package server_test

import (
	"bytes"
	"os"
	"testing"
)

// TestOpenAPIServed: GET /v1/openapi.yaml answers the document in the source
// tree, byte for byte, to a caller without a token.
func TestOpenAPIServed(t *testing.T) {
	ts := MustOpenServer(t)
	want, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	resp := ts.Do(t, Req{Method: "GET", Path: "/v1/openapi.yaml"}).WantStatus(t, 200)
	if got := resp.Header.Get("Content-Type"); got != "application/yaml" {
		t.Fatalf("Content-Type: got %q, want application/yaml", got)
	}
	if !bytes.Equal(resp.Body, want) {
		t.Fatalf("the served document (%d bytes) differs from server/openapi.yaml (%d bytes)", len(resp.Body), len(want))
	}
}
