package blobs

import "errors"

// Sentinel errors returned by the engines. Compare with errors.Is; the server maps
// each to an HTTP status in one place.
var (
	// ErrNotFound reports that no blob with the hash is stored.
	ErrNotFound = errors.New("blobs: not found")
	// ErrHashMismatch reports that the bytes given to Put do not hash to the
	// expected hash.
	ErrHashMismatch = errors.New("blobs: hash mismatch")
	// ErrTooLarge reports that the reader given to Put held more than maxSize
	// bytes.
	ErrTooLarge = errors.New("blobs: too large")
	// ErrInvalidHash reports a hash that is not 64 lowercase hex characters.
	ErrInvalidHash = errors.New("blobs: invalid hash")
	// ErrCorrupt reports a stored file whose bytes no longer hash to its name.
	ErrCorrupt = errors.New("blobs: corrupt")
)
