package server

import (
	"testing"

	"sealbox/kv/fault"
)

// FuzzReadDirectoryVersion: the directory reader never panics on hostile
// bytes, refuses only with 400 error.directory.malformed, and accepts only a
// top-level CBOR map with a version of at least 1. Seeds beyond these live in
// testdata/fuzz/FuzzReadDirectoryVersion.
func FuzzReadDirectoryVersion(f *testing.F) {
	for _, seed := range []string{
		"\xa1\x71directory_version\x01",
		"\xa2\x71directory_version\x01\x71directory_version\x02",
		"\xbf\x01\x02\x71directory_version\x1b\xff\xff\xff\xff\xff\xff\xff\xff\xff",
		"\xa1\x71directory_version\xc2\x41\x01",
		"\x9f\x9f\x9f\x9f\xff\xff\xff\xff",
		"",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		v, err := readDirectoryVersion(body)
		if err != nil {
			if code := fault.ErrorCode(err); code != fault.ECodeDirectoryMalformed {
				t.Fatalf("refusal with code %q for %x", code, body)
			}
			return
		}
		if v == 0 {
			t.Fatalf("accepted version 0 from %x", body)
		}
		if body[0]>>5 != 5 {
			t.Fatalf("accepted a top level that is not a map: %x", body)
		}
		if again, err := readDirectoryVersion(body); err != nil || again != v {
			t.Fatalf("a second read disagrees: %d, %v", again, err)
		}
	})
}
