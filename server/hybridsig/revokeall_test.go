package hybridsig_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"

	"sealbox/server/hybridsig"
)

const (
	testUserID = "6f1c2b9e-3d4a-4e5f-8a7b-1c2d3e4f5a6b"
	// "sbx_ch_" and the unpadded base64url of the 32 bytes 0x80..0x9f.
	testChallenge = "sbx_ch_gIGCg4SFhoeIiYqLjI2Oj5CRkpOUlZaXmJmam5ydnp8"
)

// TestRevokeAllSigningBytesExact spells out the expected encoding head by
// head, so the key order and every length prefix are checked by hand rather
// than by the encoder that produced them. Lexicographic order would put
// "challenge" first; core deterministic order compares the encoded keys, and
// the shorter heads-plus-text of "purpose" and "user_id" (8 bytes) sort before
// "challenge" (10 bytes).
func TestRevokeAllSigningBytesExact(t *testing.T) {
	var want []byte
	for _, part := range []string{
		"\xa3",                           // map of 3 pairs
		"\x67" + "purpose",               // text of 7 bytes
		"\x75" + "sealbox/revoke-all/v1", // text of 21 bytes (0x60 + 21)
		"\x67" + "user_id",               // text of 7 bytes
		"\x78\x24" + testUserID,          // text, 1-byte length follows: 36
		"\x69" + "challenge",             // text of 9 bytes
		"\x78\x32" + testChallenge,       // text, 1-byte length follows: 50
	} {
		want = append(want, part...)
	}
	got := hybridsig.RevokeAllSigningBytes(testUserID, testChallenge)
	if !bytes.Equal(got, want) {
		t.Errorf("got  %x\nwant %x", got, want)
	}
}

// textHead is the RFC 8949 head of a text string of n bytes in its shortest
// form (major type 3), as core deterministic encoding requires.
func textHead(n int) []byte {
	switch {
	case n < 24:
		return []byte{0x60 | byte(n)}
	case n < 1<<8:
		return []byte{0x78, byte(n)}
	default: // n < 1<<16 in this test
		return []byte{0x79, byte(n >> 8), byte(n)}
	}
}

func TestRevokeAllSigningBytesLengths(t *testing.T) {
	for _, n := range []int{0, 23, 24, 255, 256} {
		userID := strings.Repeat("u", n)
		challenge := strings.Repeat("c", n)
		var want []byte
		want = append(want, 0xa3)
		for _, kv := range [][2]string{{"purpose", "sealbox/revoke-all/v1"}, {"user_id", userID}, {"challenge", challenge}} {
			for _, s := range kv {
				want = append(append(want, textHead(len(s))...), s...)
			}
		}
		got := hybridsig.RevokeAllSigningBytes(userID, challenge)
		if !bytes.Equal(got, want) {
			t.Errorf("length %d:\ngot  %x\nwant %x", n, got, want)
		}

		var decoded map[string]string
		if err := cbor.Unmarshal(got, &decoded); err != nil {
			t.Fatalf("length %d: decoding: %v", n, err)
		}
		if decoded["user_id"] != userID || decoded["challenge"] != challenge || len(decoded) != 3 {
			t.Errorf("length %d: decoded %v", n, decoded)
		}
	}
}

// The committed vector lets client implementations check their encoding,
// key layout and signatures against the server's. Regenerate it, after an
// intended change only, with
//
//	go test ./server/hybridsig -run TestRevokeAllVector -update
var update = flag.Bool("update", false, "rewrite "+vectorPath+" from the inputs in this test")

const vectorPath = "../../testdata/revoke_all_vector.json"

type revokeAllVector struct {
	Description     string `json:"description"`
	SeedHex         string `json:"seed_hex"`
	UserID          string `json:"user_id"`
	Challenge       string `json:"challenge"`
	SigningBytesHex string `json:"revoke_all_signing_bytes_hex"`
	PublicKeyBase64 string `json:"public_key_base64"`
	SignatureHex    string `json:"signature_hex"`
}

const vectorDescription = "revoke_all_signing_bytes and a hybrid proof over it (server/PROTOCOL.md §4). " +
	"Keys from seed: Ed25519 seed = SHA-256(\"ed25519\" || seed), ML-DSA-65 seed (xi) = SHA-256(\"mldsa65\" || seed). " +
	"Public key = Ed25519 (32) || ML-DSA-65 (1952), standard base64. " +
	"Signature = Ed25519 (64) || ML-DSA-65 (3309) over the signing bytes; ML-DSA-65 uses the deterministic variant " +
	"(FIPS 204, rnd = 0^32) and the empty context, so the signature is reproducible. " +
	"On the wire the proof is the signature in standard base64."

func newVector(seed [32]byte, userID, challenge string) revokeAllVector {
	key := hybridsig.NewDevKey(seed)
	msg := hybridsig.RevokeAllSigningBytes(userID, challenge)
	return revokeAllVector{
		Description:     vectorDescription,
		SeedHex:         hex.EncodeToString(seed[:]),
		UserID:          userID,
		Challenge:       challenge,
		SigningBytesHex: hex.EncodeToString(msg),
		PublicKeyBase64: key.PublicKeyBase64(),
		SignatureHex:    hex.EncodeToString(key.Sign(msg)),
	}
}

func TestRevokeAllVector(t *testing.T) {
	if *update {
		var seed [32]byte
		for i := range seed {
			seed[i] = byte(i)
		}
		b, err := json.MarshalIndent(newVector(seed, testUserID, testChallenge), "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(vectorPath, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	b, err := os.ReadFile(vectorPath)
	if err != nil {
		t.Fatal(err)
	}
	var v revokeAllVector
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}

	// First, the file on its own terms, as a client would use it.
	msg, err := hex.DecodeString(v.SigningBytesHex)
	if err != nil {
		t.Fatal(err)
	}
	if got := hybridsig.RevokeAllSigningBytes(v.UserID, v.Challenge); !bytes.Equal(got, msg) {
		t.Errorf("signing bytes:\ngot  %x\nwant %x", got, msg)
	}
	sig, err := hex.DecodeString(v.SignatureHex)
	if err != nil {
		t.Fatal(err)
	}
	if err := mustDecodePublicKey(t, v.PublicKeyBase64).Verify(msg, sig); err != nil {
		t.Errorf("recorded signature does not verify: %v", err)
	}

	// Then regeneration from the seed: the key and the signature must come out
	// byte for byte the same, which holds because signing is deterministic.
	seed, err := hex.DecodeString(v.SeedHex)
	if err != nil || len(seed) != 32 {
		t.Fatalf("seed_hex: %d bytes, %v", len(seed), err)
	}
	want := newVector([32]byte(seed), v.UserID, v.Challenge)
	if v != want {
		t.Errorf("%s is stale; rerun with -update if the change is intended:\ngot  %+v\nwant %+v", vectorPath, v, want)
	}
}

// BenchmarkRevokeAllVerify measures what the revoke-all handler does per
// request once the challenge is burned: decode the pinned key and the proof
// from base64, build the signing bytes, verify both halves.
func BenchmarkRevokeAllVerify(b *testing.B) {
	key := hybridsig.NewDevKey([32]byte{1})
	pinned := key.PublicKeyBase64()
	proof := key.SignBase64(hybridsig.RevokeAllSigningBytes(testUserID, testChallenge))
	b.ReportAllocs()
	for b.Loop() {
		pk, err := hybridsig.DecodePublicKey(pinned)
		if err != nil {
			b.Fatal(err)
		}
		sig, err := hybridsig.DecodeSignature(proof)
		if err != nil {
			b.Fatal(err)
		}
		if err := pk.Verify(hybridsig.RevokeAllSigningBytes(testUserID, testChallenge), sig); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodePublicKey backs the claim on PublicKey that parsing is cheap
// next to verifying, so parsed keys need no cache.
func BenchmarkDecodePublicKey(b *testing.B) {
	pinned := hybridsig.NewDevKey([32]byte{1}).PublicKeyBase64()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := hybridsig.DecodePublicKey(pinned); err != nil {
			b.Fatal(err)
		}
	}
}
