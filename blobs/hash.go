package blobs

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
)

// NewHash returns the hash that names a blob, SHA-256. A caller hashing
// bytes on their way to the store (a resumable transfer, which keeps the
// state between requests) uses it with Address, so every content address
// comes from these two functions.
func NewHash() hash.Hash { return sha256.New() }

// Address is the content address of what h has hashed: 64 lowercase hex
// characters.
func Address(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

// AddressOf is the content address of b.
func AddressOf(b []byte) string {
	h := NewHash()
	h.Write(b)
	return Address(h)
}

// ValidHash reports whether s is a content address: exactly 64 lowercase hex
// characters (a SHA-256 digest). Every method of Dir checks its hash with
// ValidHash before touching the filesystem.
func ValidHash(s string) bool {
	return len(s) == 64 && isLowerHex(s)
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
