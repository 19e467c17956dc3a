package server

import (
	"errors"
	"testing"

	"sealbox/kv/fault"
)

// FuzzReadDirectoryVersion: the directory reader never panics on hostile
// bytes, refuses only with 400 error.directory.malformed or, for a version
// above 2^53-1, error.request.invalid naming directory_version, and accepts
// only a top-level CBOR map with a version from 1 to 2^53-1. Seeds beyond
// these live in testdata/fuzz/FuzzReadDirectoryVersion.
func FuzzReadDirectoryVersion(f *testing.F) {
	for _, seed := range []string{
		"\xa1\x71directory_version\x01",
		"\xa2\x71directory_version\x01\x71directory_version\x02",
		"\xbf\x01\x02\x71directory_version\x1b\xff\xff\xff\xff\xff\xff\xff\xff\xff",
		"\xa1\x71directory_version\xc2\x41\x01",
		"\xa1\x71directory_version\x1b\x00\x1f\xff\xff\xff\xff\xff\xff",
		"\xa1\x71directory_version\x1b\x00\x20\x00\x00\x00\x00\x00\x00",
		"\x9f\x9f\x9f\x9f\xff\xff\xff\xff",
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		v, err := readDirectoryVersion(body)
		if err != nil {
			var fe *fault.Error
			if !errors.As(err, &fe) {
				t.Fatalf("refusal %v for %x", err, body)
			}
			if fe.Code != fault.ECodeDirectoryMalformed && (fe.Code != fault.ECodeInvalid || fe.Field != "directory_version") {
				t.Fatalf("refusal with code %q, field %q for %x", fe.Code, fe.Field, body)
			}
			return
		}
		if v == 0 || v > maxDirectoryVersion {
			t.Fatalf("accepted version %d from %x", v, body)
		}
		if body[0]>>5 != 5 {
			t.Fatalf("accepted a top level that is not a map: %x", body)
		}
		if again, err := readDirectoryVersion(body); err != nil || again != v {
			t.Fatalf("a second read disagrees: %d, %v", again, err)
		}
	})
}
