package hybridsig_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"testing"

	"sealbox/server/hybridsig"
)

func TestDecodePublicKeyRoundTrip(t *testing.T) {
	key := hybridsig.NewDevKey([32]byte{1})
	pk, err := hybridsig.DecodePublicKey(key.PublicKeyBase64())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pk.Bytes(), key.PublicKey(); !bytes.Equal(got, want) {
		t.Errorf("Bytes: got %x..., want %x...", got[:8], want[:8])
	}
	if got, want := len(pk.Bytes()), hybridsig.PublicKeySize; got != want {
		t.Errorf("Bytes: got %d bytes, want %d", got, want)
	}
}

func TestParsePublicKeyCopiesInput(t *testing.T) {
	key := hybridsig.NewDevKey([32]byte{1})
	raw := key.PublicKey()
	pk, err := hybridsig.ParsePublicKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	for i := range raw {
		raw[i] ^= 0xff
	}
	if !bytes.Equal(pk.Bytes(), key.PublicKey()) {
		t.Error("changing the input after parsing changed the key")
	}
	msg := []byte("message")
	if err := pk.Verify(msg, key.Sign(msg)); err != nil {
		t.Errorf("Verify after input changed: %v", err)
	}
}

func TestBytesReturnsACopy(t *testing.T) {
	key := hybridsig.NewDevKey([32]byte{1})
	pk, err := hybridsig.ParsePublicKey(key.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	b := pk.Bytes()
	b[0] ^= 0xff
	b[len(b)-1] ^= 0xff
	if !bytes.Equal(pk.Bytes(), key.PublicKey()) {
		t.Error("changing the result of Bytes changed the key")
	}
}

func TestParsePublicKeyWrongLength(t *testing.T) {
	for _, n := range []int{0, 32, 1952, hybridsig.PublicKeySize - 1, hybridsig.PublicKeySize + 1, 2 * hybridsig.PublicKeySize} {
		_, err := hybridsig.ParsePublicKey(make([]byte, n))
		if !errors.Is(err, hybridsig.ErrMalformedKey) {
			t.Errorf("%d bytes: got %v, want ErrMalformedKey", n, err)
		}
	}
}

func TestDecodePublicKeyRefusesNonCanonical(t *testing.T) {
	valid := hybridsig.NewDevKey([32]byte{1}).PublicKeyBase64()
	for _, tc := range nonCanonical(t, valid, hybridsig.PublicKeySize) {
		t.Run(tc.name, func(t *testing.T) {
			pk, err := hybridsig.DecodePublicKey(tc.in)
			if !errors.Is(err, hybridsig.ErrMalformedKey) {
				t.Errorf("got (%v, %v), want ErrMalformedKey", pk, err)
			}
		})
	}
}

// addBase64Seeds seeds a decoder's fuzz test from one valid encoding: it,
// cut short, with a line break inside, empty, and padding alone.
func addBase64Seeds(f *testing.F, valid string) {
	f.Add(valid)
	f.Add(valid[:len(valid)-2])
	f.Add(valid[:76] + "\n" + valid[77:])
	f.Add("")
	f.Add("====")
}

// FuzzDecodePublicKey checks that no input panics and that only the canonical
// encoding of a key of the exact size is accepted. Run it with a short
// minimization budget, e.g.
//
//	go test ./server/hybridsig -run '^$' -fuzz '^FuzzDecodePublicKey$' -fuzzminimizetime 1s
//
// because every accepted input has one exact length, so the default 60s spent
// minimizing each new input cannot shrink it and only stalls fuzzing.
func FuzzDecodePublicKey(f *testing.F) {
	addBase64Seeds(f, hybridsig.NewDevKey([32]byte{1}).PublicKeyBase64())
	f.Fuzz(func(t *testing.T, s string) {
		pk, err := hybridsig.DecodePublicKey(s)
		if err != nil {
			if !errors.Is(err, hybridsig.ErrMalformedKey) {
				t.Fatalf("error %v does not wrap ErrMalformedKey", err)
			}
			return
		}
		raw := pk.Bytes()
		if len(raw) != hybridsig.PublicKeySize {
			t.Fatalf("accepted a key of %d bytes", len(raw))
		}
		if got := base64.StdEncoding.EncodeToString(raw); got != s {
			t.Fatalf("accepted a non-canonical encoding: %q re-encodes as %q", s, got)
		}
	})
}
