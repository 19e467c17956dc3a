package hybridsig

import (
	"crypto/ed25519"
	"fmt"

	"filippo.io/mldsa"
)

// DecodeSignature decodes a proof: standard base64 with padding of exactly
// SignatureSize bytes, in canonical form only (as DecodePublicKey). Errors
// wrap ErrMalformedSignature. It checks the size only; Verify checks the
// content.
func DecodeSignature(b64 string) ([]byte, error) {
	sig, ok := decodeExact(b64, SignatureSize)
	if !ok {
		return nil, fmt.Errorf("%w: want %d bytes as padded standard base64", ErrMalformedSignature, SignatureSize)
	}
	return sig, nil
}

// Verify reports whether signature is a valid hybrid signature of message by
// pk: nil only when the Ed25519 half (pure Ed25519 of RFC 8032, neither
// Ed25519ph nor Ed25519ctx) and the ML-DSA-65 half (FIPS 204, empty context)
// both verify. A signature of the wrong size fails with ErrMalformedSignature;
// any other failure, including an ML-DSA half whose encoding is invalid, with
// ErrBadSignature.
//
// The Ed25519 half is checked first only because it is the cheaper one; the
// order does not change the outcome. A verification costs a few hundred
// microseconds of CPU, mostly ML-DSA (BenchmarkRevokeAllVerify): cheap for a
// request that first had to burn a single-use challenge.
func (pk *PublicKey) Verify(message, signature []byte) error {
	if len(signature) != SignatureSize {
		return fmt.Errorf("%w: %d bytes, want %d", ErrMalformedSignature, len(signature), SignatureSize)
	}
	edSig, mlSig := signature[:ed25519.SignatureSize], signature[ed25519.SignatureSize:]
	if !ed25519.Verify(pk.ed, message, edSig) {
		return fmt.Errorf("%w: Ed25519 half", ErrBadSignature)
	}
	if err := mldsa.Verify(pk.ml, message, mlSig, nil); err != nil {
		return fmt.Errorf("%w: ML-DSA-65 half: %v", ErrBadSignature, err)
	}
	return nil
}
