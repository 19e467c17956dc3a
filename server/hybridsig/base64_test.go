package hybridsig_test

import (
	"encoding/base64"
	"strings"
	"testing"
)

// nonCanonical returns near-misses of valid, the canonical padded standard
// base64 of size bytes, each of which a strict decoder must refuse. Several
// are accepted by base64.StdEncoding, which is why they are listed.
func nonCanonical(t *testing.T, valid string, size int) []struct{ name, in string } {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

	// Both layouts are 1 mod 3 bytes long, so the text ends in "X==" where X
	// carries 2 data bits and 4 padding bits that must be zero.
	if !strings.HasSuffix(valid, "==") {
		t.Fatalf("test input %q... does not end in ==", valid[:8])
	}
	x := strings.IndexByte(alphabet, valid[len(valid)-3])
	nonZeroPadding := valid[:len(valid)-3] + string(alphabet[x|1]) + "=="
	if lax, err := base64.StdEncoding.DecodeString(nonZeroPadding); err != nil || len(lax) != size {
		t.Fatalf("non-zero padding case is not lax-decodable: %v", err)
	}

	urlAlphabet := strings.NewReplacer("+", "-", "/", "_").Replace(valid)
	if urlAlphabet == valid {
		t.Fatal("test input has no + or /, so the URL-alphabet case would be valid")
	}

	return []struct{ name, in string }{
		{"empty", ""},
		{"not base64", strings.Repeat("!", len(valid))},
		{"without padding", strings.TrimRight(valid, "=")},
		{"extra padding", valid + "="},
		{"URL alphabet", urlAlphabet},
		{"non-zero padding bits", nonZeroPadding},
		{"line break inside", valid[:76] + "\n" + valid[76:]},
		{"line break replacing a character", valid[:76] + "\n" + valid[77:]},
		{"CRLF at end", valid + "\r\n"},
		{"leading space", " " + valid},
		{"trailing space", valid + " "},
		{"one byte short", base64.StdEncoding.EncodeToString(make([]byte, size-1))},
		{"one byte long", base64.StdEncoding.EncodeToString(make([]byte, size+1))},
		{"twice the size", base64.StdEncoding.EncodeToString(make([]byte, 2*size))},
	}
}
