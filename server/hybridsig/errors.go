package hybridsig

import "errors"

// Errors returned by this package, wrapped with detail; compare them with
// errors.Is. The server answers all three with 401 error.auth.proof_required
// on global sign-out; ErrMalformedKey is a 400 where a key is published.
var (
	// ErrMalformedKey: the identity public key is not 1984 bytes, or not
	// canonical standard base64 with padding.
	ErrMalformedKey = errors.New("hybridsig: malformed identity public key")

	// ErrMalformedSignature: the signature is not 3373 bytes, or not canonical
	// standard base64 with padding.
	ErrMalformedSignature = errors.New("hybridsig: malformed signature")

	// ErrBadSignature: the signature is well-sized but at least one half does
	// not verify for this key and message.
	ErrBadSignature = errors.New("hybridsig: signature does not verify")
)
