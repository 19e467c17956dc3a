package hybridsig_test

import (
	"bytes"
	"testing"

	"sealbox/server/hybridsig"
)

func TestNewDevKeyIsDeterministic(t *testing.T) {
	seed := [32]byte{1, 2, 3}
	a, b := hybridsig.NewDevKey(seed), hybridsig.NewDevKey(seed)
	if !bytes.Equal(a.PublicKey(), b.PublicKey()) {
		t.Fatal("same seed gave different public keys")
	}
	msg := []byte("message")
	if !bytes.Equal(a.Sign(msg), b.Sign(msg)) {
		t.Fatal("same seed and message gave different signatures")
	}
	if got, want := len(a.PublicKey()), 1984; got != want {
		t.Errorf("public key: got %d bytes, want %d", got, want)
	}
	if got, want := len(a.Sign(msg)), 3373; got != want {
		t.Errorf("signature: got %d bytes, want %d", got, want)
	}
}

func TestNewKeySeedsDiffer(t *testing.T) {
	a, b := hybridsig.NewDevKey([32]byte{1}), hybridsig.NewDevKey([32]byte{2})
	pa, pb := a.PublicKey(), b.PublicKey()
	if bytes.Equal(pa[:32], pb[:32]) {
		t.Error("different seeds gave the same Ed25519 half")
	}
	if bytes.Equal(pa[32:], pb[32:]) {
		t.Error("different seeds gave the same ML-DSA-65 half")
	}
}
