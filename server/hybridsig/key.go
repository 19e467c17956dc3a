package hybridsig

import (
	"bytes"
	"crypto/ed25519"
	"fmt"

	"filippo.io/mldsa"
)

// Sizes of the hybrid layouts, in bytes.
const (
	PublicKeySize = ed25519.PublicKeySize + mldsa.MLDSA65PublicKeySize // 32 + 1952 = 1984
	SignatureSize = ed25519.SignatureSize + mldsa.MLDSA65SignatureSize // 64 + 3309 = 3373
)

// PublicKey is a parsed hybrid identity public key. Build it with
// ParsePublicKey or DecodePublicKey; the zero value is not usable.
// A PublicKey is immutable and safe for concurrent use.
//
// Parsing is cheap: a copy and one SHAKE256 over the ML-DSA half, because
// filippo.io/mldsa defers expanding the key's matrix to each verification
// rather than keep a 68 KB expanded key. Decoding from base64 costs about a
// twentieth of a verification (BenchmarkDecodePublicKey against
// BenchmarkRevokeAllVerify), and a cached key would still be expanded on every
// Verify, so a handler should simply decode the stored key per request.
type PublicKey struct {
	ed ed25519.PublicKey
	ml *mldsa.PublicKey
}

// ParsePublicKey parses the 1984-byte hybrid layout. It fails with
// ErrMalformedKey unless raw has exactly that length.
//
// Every 1952-byte string is a well-formed ML-DSA-65 key, and the Ed25519 half
// is not checked to be a valid curve point (the standard library offers no
// such check): a key whose Ed25519 half is not a point is accepted here and
// then fails every verification. raw is copied; the caller may reuse it.
func ParsePublicKey(raw []byte) (*PublicKey, error) {
	if len(raw) != PublicKeySize {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrMalformedKey, len(raw), PublicKeySize)
	}
	ml, err := mldsa.NewPublicKey(mldsa.MLDSA65(), raw[ed25519.PublicKeySize:])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedKey, err)
	}
	return &PublicKey{
		ed: bytes.Clone(raw[:ed25519.PublicKeySize]),
		ml: ml,
	}, nil
}

// DecodePublicKey parses the X-Service-Identity-Key form: standard base64 with
// padding of the 1984-byte layout. Only the canonical encoding is accepted (no
// missing padding, no URL alphabet, no line breaks or spaces, no non-zero
// padding bits), so equal keys always have equal text. Errors wrap
// ErrMalformedKey.
func DecodePublicKey(b64 string) (*PublicKey, error) {
	raw, ok := decodeExact(b64, PublicKeySize)
	if !ok {
		return nil, fmt.Errorf("%w: want %d bytes as padded standard base64", ErrMalformedKey, PublicKeySize)
	}
	return ParsePublicKey(raw)
}

// Bytes returns the 1984-byte layout, Ed25519 half first, in a new slice.
func (pk *PublicKey) Bytes() []byte {
	return append(bytes.Clone(pk.ed), pk.ml.Bytes()...)
}
