package server

import (
	"encoding/hex"
	"regexp"
	"strings"
	"testing"

	"github.com/julienschmidt/httprouter"

	"sealbox/blobs"
	"sealbox/kv/fault"
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
	case !want && fault.ErrorCode(err) != fault.ECodeMalformed:
		t.Fatalf("%s %q refused with %v, want %s", name, v, err, fault.ECodeMalformed)
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

// uuidShape is the oracle for parseUUID: 8-4-4-4-12 hex digits of either
// case.
var uuidShape = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// FuzzPathUUID: the UUID path parameters. session_id and user_id go
// through parseUUID (either case, answered lowercase); album_id through
// isCanonicalUUID (lowercase only) and pathParam, which refuses anything
// else as a malformed path parameter (400).
func FuzzPathUUID(f *testing.F) {
	f.Add("6f1c2b9e-3d4a-4e5f-8a7b-1c2d3e4f5a6b")
	f.Fuzz(func(t *testing.T, v string) {
		want := uuidShape.MatchString(v)
		canon, ok := parseUUID(v)
		if ok != want {
			t.Fatalf("parseUUID(%q): ok %v, want %v", v, ok, want)
		}
		if ok && canon != strings.ToLower(v) {
			t.Fatalf("parseUUID(%q) = %q, want it lowercased", v, canon)
		}
		if again, ok2 := parseUUID(canon); ok && (!ok2 || again != canon) {
			t.Fatalf("parseUUID is not idempotent on %q", canon)
		}
		got, err := pathParam(httprouter.Params{{Key: "album_id", Value: v}}, "album_id", isCanonicalUUID)
		wantCanon := want && v == strings.ToLower(v)
		switch {
		case wantCanon && (err != nil || got != v):
			t.Fatalf("album_id %q refused: %v", v, err)
		case !wantCanon && err == nil:
			t.Fatalf("album_id %q accepted", v)
		case !wantCanon && fault.ErrorCode(err) != fault.ECodeMalformed:
			t.Fatalf("album_id %q refused with %v, want %s", v, err, fault.ECodeMalformed)
		}
	})
}

// FuzzPathUploadID: an upload_id is the upload prefix and one or more
// base64url characters (tokens carry at least 256 bits, of any length);
// nothing else reaches the store.
func FuzzPathUploadID(f *testing.F) {
	f.Add(prefixUpload + strings.Repeat("A", 43))
	f.Add(prefixUpload + strings.Repeat("A", 86))
	f.Add(prefixUpload)
	f.Fuzz(func(t *testing.T, v string) {
		rest, hasPrefix := strings.CutPrefix(v, prefixUpload)
		// Any base64url characters are accepted, canonical or not: the
		// store's lookup by hash decides whether the id exists.
		want := hasPrefix && rest != "" && isURLAlphabet(rest)
		got, err := pathParam(httprouter.Params{{Key: "upload_id", Value: v}}, "upload_id", isUploadID)
		switch {
		case want && (err != nil || got != v):
			t.Fatalf("upload_id %q refused: %v", v, err)
		case !want && err == nil:
			t.Fatalf("upload_id %q accepted", v)
		case !want && fault.ErrorCode(err) != fault.ECodeMalformed:
			t.Fatalf("upload_id %q refused with %v, want %s", v, err, fault.ECodeMalformed)
		}
	})
}

func isURLAlphabet(s string) bool {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for _, c := range s {
		if !strings.ContainsRune(alphabet, c) {
			return false
		}
	}
	return true
}
