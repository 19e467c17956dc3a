package sealed

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestShareRoundTrip(t *testing.T) {
	s := NewLinkSecret()
	f := s.Fragment()
	if len(f) != 43 || strings.ContainsAny(f, "+/=") {
		t.Errorf("fragment %q is not 43 characters of url base64", f)
	}
	back, err := ParseFragment(f)
	if err != nil || back != s {
		t.Fatalf("fragment does not parse back: %v", err)
	}
	k, wrapped, err := WrapLinkKey(s, "mot de passe", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(wrapped) != WrappedSecretSize || k == s.Key() {
		t.Errorf("wrapped secret %d bytes, link key equal to the secret %v", len(wrapped), k == s.Key())
	}
	if got, err := OpenWrappedSecret(wrapped, s, "mot de passe"); err != nil || got != k {
		t.Errorf("wrapped secret does not open: %v", err)
	}
	idx := &ShareIndex{Title: "t", Items: []ShareItem{{AssetKey: NewAssetKey(), FileID: vecFileID, MetadataHash: testHash}}}
	sealed, err := SealShareIndex(k, idx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := OpenShareIndex(k, sealed)
	if err != nil || got.Title != "t" || len(got.Items) != 1 || got.Items[0] != idx.Items[0] {
		t.Errorf("share index round trip: %+v, %v", got, err)
	}
	if _, err := OpenShareIndex(s.Key(), sealed); !errors.Is(err, ErrAuth) {
		t.Errorf("share index under the fragment's key: %v, want ErrAuth", err)
	}
}

func TestWrappedSecretRefusals(t *testing.T) {
	s := NewLinkSecret()
	_, w, err := WrapLinkKey(s, "pass", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenWrappedSecret(w, s, "Pass"); !errors.Is(err, ErrAuth) {
		t.Errorf("wrong passphrase: %v, want ErrAuth", err)
	}
	// The link secret is part of the key: the passphrase alone (what the
	// server could guess at) opens nothing.
	if _, err := OpenWrappedSecret(w, NewLinkSecret(), "pass"); !errors.Is(err, ErrAuth) {
		t.Errorf("wrong fragment: %v, want ErrAuth", err)
	}
	for i := 10; i < len(w); i++ { // salt, nonce, ciphertext, tag
		c := bytes.Clone(w)
		c[i] ^= 0x80
		if _, err := OpenWrappedSecret(c, s, "pass"); !errors.Is(err, ErrAuth) {
			t.Errorf("byte %d flipped: %v, want ErrAuth", i, err)
		}
	}
	iter := func(n uint32) []byte {
		c := bytes.Clone(w)
		c[6], c[7], c[8], c[9] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
		return c
	}
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"zero iterations", iter(0), "out of range"},
		{"20 million iterations", iter(20_000_000), "out of range"},
		{"unknown KDF", append([]byte("SBXP\x01\x05"), w[6:]...), "KDF 5 unknown"},
		{"version 2", append([]byte("SBXP\x02"), w[5:]...), "wrapped secret format version 2 is not supported"},
		{"truncated", w[:len(w)-1], "malformed"},
		{"an escrow", append([]byte("SBXE"), w[4:]...), "malformed"},
	} {
		if _, err := OpenWrappedSecret(c.b, s, "pass"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

func TestParseFragmentRefusals(t *testing.T) {
	f := NewLinkSecret().Fragment()
	for _, bad := range []string{"", f + "=", f[:42], f + "A", strings.NewReplacer("-", "+", "_", "/").Replace(f) + "+", "#" + f} {
		if _, err := ParseFragment(bad); err == nil {
			t.Errorf("ParseFragment(%q) accepted", bad)
		}
	}
}

func TestShareIndexRefusals(t *testing.T) {
	k := b64Key(AssetKey{1})
	for _, c := range []struct{ name, doc string }{
		{"no items", `{"v":1}`},
		{"version 3", `{"items":[],"v":3}`},
		{"short asset key", `{"items":[{"asset_key":"AAAA","file_id":"` + vecFileID + `","metadata_hash":"` + testHash + `"}],"v":1}`},
		{"padded asset key", `{"items":[{"asset_key":"` + k + `=","file_id":"` + vecFileID + `","metadata_hash":"` + testHash + `"}],"v":1}`},
		{"bad file id", `{"items":[{"asset_key":"` + k + `","file_id":"x","metadata_hash":"` + testHash + `"}],"v":1}`},
		{"items twice", `{"items":[],"items":[],"v":1}`},
		{"null title", `{"items":[],"title":null,"v":1}`},
		{"null item", `{"items":[null],"v":1}`},
		{"null file id", `{"items":[{"asset_key":"` + k + `","file_id":null,"metadata_hash":"` + testHash + `"}],"v":1}`},
		{"newline after the document", `{"items":[],"v":1}` + "\n"},
	} {
		if _, err := ParseShareIndex([]byte(c.doc)); err == nil {
			t.Errorf("%s: parsed", c.name)
		}
	}
}
