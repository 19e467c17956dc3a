package hybridsig

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"

	"filippo.io/mldsa"
)

// DevKey is a hybrid identity private key, an Ed25519 key and an ML-DSA-65
// key, derived from a 32-byte seed: for tests and for `sealbox dev`, the
// client developers' tool. The server only verifies; a DevKey is a seed in
// memory or in a plain file, fit for experiments and never for protecting
// anything (a client keeps its identity key its own way).
type DevKey struct {
	ed ed25519.PrivateKey
	ml *mldsa.PrivateKey
}

// NewDevKey derives a DevKey from seed. The same seed always gives the same key:
//
//	Ed25519 seed   = SHA-256("ed25519" || seed)
//	ML-DSA-65 seed = SHA-256("mldsa65" || seed)   (FIPS 204 ξ, via mldsa.NewPrivateKey)
//
// The labels keep the two halves independent although they share one seed.
func NewDevKey(seed [32]byte) *DevKey {
	ml, err := mldsa.NewPrivateKey(mldsa.MLDSA65(), derive("mldsa65", seed))
	if err != nil {
		// Only a seed of the wrong length is refused, and derive returns 32 bytes.
		panic("hybridsig: " + err.Error())
	}
	return &DevKey{
		ed: ed25519.NewKeyFromSeed(derive("ed25519", seed)),
		ml: ml,
	}
}

func derive(label string, seed [32]byte) []byte {
	sum := sha256.Sum256(append([]byte(label), seed[:]...))
	return sum[:]
}

// PublicKey returns the 1984-byte hybrid public key: Ed25519 then ML-DSA-65.
func (k *DevKey) PublicKey() []byte {
	return append(k.ed.Public().(ed25519.PublicKey), k.ml.PublicKey().Bytes()...)
}

// PublicKeyBase64 returns PublicKey in the X-Service-Identity-Key form,
// standard base64 with padding.
func (k *DevKey) PublicKeyBase64() string {
	return base64.StdEncoding.EncodeToString(k.PublicKey())
}

// Sign returns the 3373-byte hybrid signature of message: Ed25519 then
// ML-DSA-65 with the empty context. Both halves are deterministic (Ed25519 by
// design, ML-DSA through FIPS 204's deterministic variant), so the same key and
// message always give the same bytes, which any conforming implementation
// reproduces; that is what makes the committed test vector checkable.
func (k *DevKey) Sign(message []byte) []byte {
	mlSig, err := k.ml.SignDeterministic(message, nil)
	if err != nil {
		// Fails only for a zero key or options other than nil; neither occurs.
		panic("hybridsig: " + err.Error())
	}
	return append(ed25519.Sign(k.ed, message), mlSig...)
}

// SignBase64 returns Sign in the wire form of a proof, standard base64 with
// padding.
func (k *DevKey) SignBase64(message []byte) string {
	return base64.StdEncoding.EncodeToString(k.Sign(message))
}
