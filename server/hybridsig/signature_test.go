package hybridsig_test

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"testing"

	"filippo.io/mldsa"

	"sealbox/server/hybridsig"
)

func mustDecodePublicKey(tb testing.TB, b64 string) *hybridsig.PublicKey {
	tb.Helper()
	pk, err := hybridsig.DecodePublicKey(b64)
	if err != nil {
		tb.Fatal(err)
	}
	return pk
}

func TestSignVerifyRoundTrip(t *testing.T) {
	key := hybridsig.NewDevKey([32]byte{1})
	pk := mustDecodePublicKey(t, key.PublicKeyBase64())
	msg := hybridsig.RevokeAllSigningBytes(testUserID, testChallenge)

	sig, err := hybridsig.DecodeSignature(key.SignBase64(msg))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sig, key.Sign(msg)) {
		t.Error("DecodeSignature(SignBase64(m)) differs from Sign(m)")
	}
	if err := pk.Verify(msg, sig); err != nil {
		t.Errorf("Verify: %v", err)
	}
}

// splice returns a signature made of the Ed25519 half of ed and the ML-DSA
// half of ml.
func splice(ed, ml []byte) []byte {
	return append(bytes.Clone(ed[:ed25519.SignatureSize]), ml[ed25519.SignatureSize:]...)
}

// flip returns a copy of b with one bit of byte i inverted.
func flip(b []byte, i int) []byte {
	b = bytes.Clone(b)
	b[i] ^= 0x01
	return b
}

func TestVerifyRefuses(t *testing.T) {
	key, other := hybridsig.NewDevKey([32]byte{1}), hybridsig.NewDevKey([32]byte{2})
	pk := mustDecodePublicKey(t, key.PublicKeyBase64())
	msg := hybridsig.RevokeAllSigningBytes(testUserID, testChallenge)
	sig := key.Sign(msg)
	sigOtherMsg := key.Sign(hybridsig.RevokeAllSigningBytes(testUserID, testChallenge+"x"))
	sigOtherKey := other.Sign(msg)

	for _, tc := range []struct {
		name string
		msg  []byte
		sig  []byte
		want error
	}{
		{"Ed25519 half bit flipped", msg, flip(sig, 10), hybridsig.ErrBadSignature},
		{"Ed25519 half from another message", msg, splice(sigOtherMsg, sig), hybridsig.ErrBadSignature},
		{"Ed25519 half from another key", msg, splice(sigOtherKey, sig), hybridsig.ErrBadSignature},
		{"ML-DSA half bit flipped in the challenge", msg, flip(sig, ed25519.SignatureSize), hybridsig.ErrBadSignature},
		{"ML-DSA half bit flipped in the response", msg, flip(sig, 1000), hybridsig.ErrBadSignature},
		{"ML-DSA half bit flipped in the hints", msg, flip(sig, hybridsig.SignatureSize-1), hybridsig.ErrBadSignature},
		{"ML-DSA half from another message", msg, splice(sig, sigOtherMsg), hybridsig.ErrBadSignature},
		{"ML-DSA half from another key", msg, splice(sig, sigOtherKey), hybridsig.ErrBadSignature},
		{"signature by another key", msg, sigOtherKey, hybridsig.ErrBadSignature},
		{"all zeros", msg, make([]byte, hybridsig.SignatureSize), hybridsig.ErrBadSignature},
		{"message bit flipped", flip(msg, len(msg)-1), sig, hybridsig.ErrBadSignature},
		{"message truncated", msg[:len(msg)-1], sig, hybridsig.ErrBadSignature},
		{"another challenge", hybridsig.RevokeAllSigningBytes(testUserID, testChallenge+"x"), sig, hybridsig.ErrBadSignature},
		{"another user", hybridsig.RevokeAllSigningBytes("00000000-0000-4000-8000-000000000000", testChallenge), sig, hybridsig.ErrBadSignature},
		{"empty signature", msg, nil, hybridsig.ErrMalformedSignature},
		{"Ed25519 half only", msg, sig[:ed25519.SignatureSize], hybridsig.ErrMalformedSignature},
		{"ML-DSA half only", msg, sig[ed25519.SignatureSize:], hybridsig.ErrMalformedSignature},
		{"one byte short", msg, sig[:len(sig)-1], hybridsig.ErrMalformedSignature},
		{"one byte long", msg, append(bytes.Clone(sig), 0), hybridsig.ErrMalformedSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := pk.Verify(tc.msg, tc.sig); !errors.Is(err, tc.want) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// TestVerifyAlgorithmVariants builds a key and signatures straight from
// crypto/ed25519 and filippo.io/mldsa, without DevKey, so that the
// layout (Ed25519 first) and the exact variants (pure Ed25519, ML-DSA-65 with
// the empty context) are pinned independently of the test helper.
func TestVerifyAlgorithmVariants(t *testing.T) {
	edSeed := sha256.Sum256([]byte("independent ed25519"))
	mlSeed := sha256.Sum256([]byte("independent mldsa65"))
	edKey := ed25519.NewKeyFromSeed(edSeed[:])
	mlKey, err := mldsa.NewPrivateKey(mldsa.MLDSA65(), mlSeed[:])
	if err != nil {
		t.Fatal(err)
	}
	pk, err := hybridsig.ParsePublicKey(append(edKey.Public().(ed25519.PublicKey), mlKey.PublicKey().Bytes()...))
	if err != nil {
		t.Fatal(err)
	}
	msg := hybridsig.RevokeAllSigningBytes(testUserID, testChallenge)

	sign := func(edOpts *ed25519.Options, mlOpts *mldsa.Options) []byte {
		t.Helper()
		edSig, err := edKey.Sign(nil, msg, edOpts)
		if err != nil {
			t.Fatal(err)
		}
		mlSig, err := mlKey.Sign(nil, msg, mlOpts)
		if err != nil {
			t.Fatal(err)
		}
		return append(edSig, mlSig...)
	}

	for _, tc := range []struct {
		name   string
		edOpts *ed25519.Options
		mlOpts *mldsa.Options
		want   error
	}{
		{"pure Ed25519 and ML-DSA-65 without context", &ed25519.Options{}, nil, nil},
		{"explicit empty ML-DSA context", &ed25519.Options{}, &mldsa.Options{Context: ""}, nil},
		{"ML-DSA context set", &ed25519.Options{}, &mldsa.Options{Context: "sealbox/revoke-all/v1"}, hybridsig.ErrBadSignature},
		{"Ed25519ctx", &ed25519.Options{Context: "sealbox/revoke-all/v1"}, nil, hybridsig.ErrBadSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := pk.Verify(msg, sign(tc.edOpts, tc.mlOpts)); !errors.Is(err, tc.want) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}

	t.Run("Ed25519ph", func(t *testing.T) {
		// Ed25519ph signs a SHA-512 digest under its own domain separator:
		// a different algorithm from pure Ed25519 that must not pass for it.
		digest := sha512.Sum512(msg)
		edSig, err := edKey.Sign(nil, digest[:], &ed25519.Options{Hash: crypto.SHA512})
		if err != nil {
			t.Fatal(err)
		}
		sig := splice(edSig, sign(&ed25519.Options{}, nil))
		if err := pk.Verify(msg, sig); !errors.Is(err, hybridsig.ErrBadSignature) {
			t.Errorf("got %v, want ErrBadSignature", err)
		}
	})

	t.Run("halves in the wrong order", func(t *testing.T) {
		good := sign(&ed25519.Options{}, nil)
		swapped := append(bytes.Clone(good[ed25519.SignatureSize:]), good[:ed25519.SignatureSize]...)
		if err := pk.Verify(msg, swapped); !errors.Is(err, hybridsig.ErrBadSignature) {
			t.Errorf("got %v, want ErrBadSignature", err)
		}
	})
}

func TestDecodeSignatureRefusesNonCanonical(t *testing.T) {
	key := hybridsig.NewDevKey([32]byte{1})
	valid := key.SignBase64(hybridsig.RevokeAllSigningBytes(testUserID, testChallenge))
	for _, tc := range nonCanonical(t, valid, hybridsig.SignatureSize) {
		t.Run(tc.name, func(t *testing.T) {
			sig, err := hybridsig.DecodeSignature(tc.in)
			if !errors.Is(err, hybridsig.ErrMalformedSignature) {
				t.Errorf("got (%d bytes, %v), want ErrMalformedSignature", len(sig), err)
			}
		})
	}
}

// FuzzDecodeSignature checks that no input panics and that only the canonical
// encoding of a signature of the exact size is accepted. Run it with a short
// minimization budget, e.g.
//
//	go test ./server/hybridsig -run '^$' -fuzz '^FuzzDecodeSignature$' -fuzzminimizetime 1s
//
// because every accepted input has one exact length, so the default 60s spent
// minimizing each new input cannot shrink it and only stalls fuzzing.
func FuzzDecodeSignature(f *testing.F) {
	addBase64Seeds(f, hybridsig.NewDevKey([32]byte{1}).SignBase64([]byte("message")))
	f.Fuzz(func(t *testing.T, s string) {
		sig, err := hybridsig.DecodeSignature(s)
		if err != nil {
			if !errors.Is(err, hybridsig.ErrMalformedSignature) {
				t.Fatalf("error %v does not wrap ErrMalformedSignature", err)
			}
			return
		}
		if len(sig) != hybridsig.SignatureSize {
			t.Fatalf("accepted a signature of %d bytes", len(sig))
		}
		if got := base64.StdEncoding.EncodeToString(sig); got != s {
			t.Fatalf("accepted a non-canonical encoding: %q re-encodes as %q", s, got)
		}
	})
}
