package server

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/julienschmidt/httprouter"

	"sealbox/blobs"
	"sealbox/kv"
)

// fuzzPathParam checks a path parameter parser against an independent
// oracle: it accepts exactly the strings of n lowercase hex characters and
// refuses everything else as a malformed path parameter (400).
func fuzzPathParam(t *testing.T, name string, valid func(string) bool, n int, v string) {
	ps := httprouter.Params{{Key: name, Value: v}}
	got, err := pathParam(ps, name, valid)
	_, hexErr := hex.DecodeString(v)
	want := len(v) == n && hexErr == nil && v == strings.ToLower(v)
	switch {
	case want && (err != nil || got != v):
		t.Fatalf("%s %q refused: %v", name, v, err)
	case !want && err == nil:
		t.Fatalf("%s %q accepted", name, v)
	case !want && kv.ErrorCode(err) != kv.ECodeMalformed:
		t.Fatalf("%s %q refused with %v, want %s", name, v, err, kv.ECodeMalformed)
	}
}

// FuzzPathOpaqueID: the opaque_id of /s/ and /v1/shares/ paths.
func FuzzPathOpaqueID(f *testing.F) {
	f.Add("0123456789abcdef0123456789abcdef")
	f.Fuzz(func(t *testing.T, v string) { fuzzPathParam(t, "opaque_id", isOpaqueID, 32, v) })
}

// FuzzPathHash: the content address of blob paths.
func FuzzPathHash(f *testing.F) {
	f.Add("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
	f.Fuzz(func(t *testing.T, v string) { fuzzPathParam(t, "hash", blobs.ValidHash, 64, v) })
}
