package blobs

// ValidHash reports whether s is a content address: exactly 64 lowercase hex
// characters (a SHA-256 digest). Every method of Store checks its hash with
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
