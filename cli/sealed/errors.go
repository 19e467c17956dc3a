package sealed

import (
	"errors"
	"fmt"
)

// Errors a caller can tell apart with errors.Is. No error of the package
// carries a key, a passphrase or plaintext: a message names a field, never
// its decrypted value.
var (
	// ErrAuth: a ciphertext did not authenticate. The key is wrong, or the
	// bytes were changed, reordered, truncated or extended.
	ErrAuth = errors.New("sealed: authentication failed (wrong key, or the data was changed)")
	// ErrTruncated: a sealed object ends before its format says it may.
	ErrTruncated = errors.New("sealed: data truncated")
	// ErrMalformed: bytes that are not the format they claim to be.
	ErrMalformed = errors.New("sealed: malformed data")
	// ErrWeakParams: a passphrase KDF asked to create a result
	// with parameters below the package's floor (FORMAT.md §5, §9).
	ErrWeakParams = errors.New("sealed: key-derivation parameters below the minimum")
	// ErrRecoveryKey: a recovery key that does not parse or whose check
	// characters do not match (a typo).
	ErrRecoveryKey = errors.New("sealed: recovery key mistyped")
)

// VersionError is returned for a header whose format version this build does
// not read. Its message names the object and the version found.
type VersionError struct {
	Object  string // "stream", "escrow", "wrapped key", ...
	Version int    // the version found
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("sealed: %s format version %d is not supported (this build reads version 1)", e.Object, e.Version)
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}
