package hybridsig

import "encoding/base64"

// strictStd rejects non-zero trailing padding bits, so one byte string has
// exactly one accepted text form.
var strictStd = base64.StdEncoding.Strict()

// decodeExact decodes s as standard base64 with padding and reports whether it
// is the canonical encoding of exactly size bytes.
//
// The length check comes first: it bounds the work done on oversized input and,
// together with the decoded-length check, refuses CR and LF, which the
// standard decoder otherwise skips silently (a string of the right length
// holding a line break decodes short or fails).
func decodeExact(s string, size int) ([]byte, bool) {
	if len(s) != base64.StdEncoding.EncodedLen(size) {
		return nil, false
	}
	b, err := strictStd.DecodeString(s)
	if err != nil || len(b) != size {
		return nil, false
	}
	return b, true
}
