// Package ids mints the identifiers and bearer secrets sealbox hands out.
package ids

import (
	"encoding/base64"
	"fmt"
	"io"
)

// Token returns prefix followed by 256 bits from r, base64url without
// padding. The prefix names a token's type at a glance (in a bug report, a
// leaked-secret scanner), never its owner.
func Token(r io.Reader, prefix string) string {
	var b [32]byte
	Fill(r, b[:])
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// UUID returns a random (version 4) UUID in canonical lowercase form.
func UUID(r io.Reader) string {
	var b [16]byte
	Fill(r, b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// Fill fills b from r. crypto/rand does not fail on supported
// platforms; if it ever did, handing out predictable secrets would be worse
// than stopping.
func Fill(r io.Reader, b []byte) {
	if _, err := io.ReadFull(r, b); err != nil {
		panic(fmt.Sprintf("sealbox: randomness source failed: %v", err))
	}
}
