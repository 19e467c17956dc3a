package sealed

import (
	"bytes"
	"errors"
	"testing"
)

// Fuzz targets for every parser of bytes a client receives from elsewhere:
// stream headers and chunks, escrow, wrapped keys, metadata, share index,
// wrapped secret, manifest, recovery key, URL fragment and device seal. Each
// checks a property on what it accepts, besides not panicking. None runs a
// costly KDF: escrows are opened with the recovery key (HKDF) only, and a
// wrapped secret only when it asks for few PBKDF2 iterations.

var fuzzKey = BlobKey{9}

// FuzzStream feeds arbitrary bytes to both stream readers: they must agree,
// and what they accept must seal back to the same bytes' length.
func FuzzStream(f *testing.F) {
	for _, n := range []int{0, 1, 100} {
		s := sealBytes(fuzzKey, plainRule(int64(n)), [16]byte{1})
		f.Add(s)
		f.Add(s[:len(s)-1])
	}
	f.Add([]byte("SBXS\x02"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p1, e1 := openAll(fuzzKey, b)
		p2, e2 := openAt(fuzzKey, b)
		if (e1 == nil) != (e2 == nil) || e1 == nil && !bytes.Equal(p1, p2) {
			t.Fatalf("Reader (%v) and ReaderAt (%v) disagree", e1, e2)
		}
		if e1 == nil && SealedSize(int64(len(p1))) != int64(len(b)) {
			t.Fatalf("accepted %d sealed bytes for %d of plaintext", len(b), len(p1))
		}
	})
}

// FuzzEscrow parses arbitrary escrows and opens them with a recovery key:
// only the escrow made for that key opens, to its secrets.
func FuzzEscrow(f *testing.F) {
	rk := RecoveryKey{3}
	want := AccountSecrets{Master: MasterKey{4}, Identity: IdentitySeed{5}}
	good, err := NewEscrow(want, "pw", rk, testArgon2)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:40])
	f.Add([]byte("SBXE\x09"))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := ParseEscrow(b)
		if err != nil {
			return
		}
		if info.Argon2.check() != nil || len(b) != EscrowSize {
			t.Fatal("ParseEscrow accepted parameters or a size it refuses")
		}
		if got, err := OpenEscrowWithRecoveryKey(b, rk); err == nil && got != want {
			t.Fatal("an escrow opened to other secrets than it was made with")
		}
	})
}

// FuzzWrappedKey unwraps arbitrary bytes as an album key.
func FuzzWrappedKey(f *testing.F) {
	mk := MasterKey{1}
	w, _ := mk.WrapAlbumKey(vecAlbumID, 1, AlbumKey{2})
	f.Add(w)
	f.Add(w[:64])
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := mk.UnwrapAlbumKey(vecAlbumID, 1, b)
		if err == nil && (k != AlbumKey{2} || len(b) != wrappedKeySize) {
			t.Fatal("unwrapped another key than was wrapped")
		}
	})
}

// FuzzMetadata parses arbitrary metadata plaintext: what it accepts is
// written back in a form that parses to the same document.
func FuzzMetadata(f *testing.F) {
	plain, _ := EncodeMetadata(testMetadata())
	f.Add(plain)
	f.Add([]byte(`{"v":2}`))
	f.Add([]byte(`{"v":1,"name":"a","name":"b"}`))
	pair := testMetadata()
	pair.Blobs[RoleCompanion] = BlobRef{Hash: testHash, Size: 7}
	pair.Companion = &Companion{ContentHMAC: testHash, MediaType: "video/quicktime", Name: "IMG_0001.MOV", Size: 7}
	pair.Sidecars = []Sidecar{{Name: "IMG_0001.xmp", Data: []byte("<x:xmpmeta/>")}, {Name: "empty.xmp"}}
	plain, err := EncodeMetadata(pair)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(plain)
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMetadata(b)
		if err != nil {
			return
		}
		out, err := EncodeMetadata(m)
		if err != nil {
			t.Fatalf("accepted metadata does not encode: %v", err)
		}
		m2, err := ParseMetadata(out)
		if err != nil {
			t.Fatalf("written metadata does not parse: %v", err)
		}
		if out2, _ := EncodeMetadata(m2); !bytes.Equal(out, out2) {
			t.Fatal("metadata changes each time it is rewritten")
		}
	})
}

// FuzzShareIndex parses arbitrary share index plaintext.
func FuzzShareIndex(f *testing.F) {
	plain, _ := EncodeShareIndex(&ShareIndex{Title: "x", Items: []ShareItem{{AssetKey: AssetKey{1}, FileID: vecFileID, MetadataHash: testHash}}})
	f.Add(plain)
	f.Add([]byte(`{"items":[],"v":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		idx, err := ParseShareIndex(b)
		if err != nil {
			return
		}
		out, err := EncodeShareIndex(idx)
		if err != nil {
			t.Fatalf("accepted index does not encode: %v", err)
		}
		if again, err := ParseShareIndex(out); err != nil || len(again.Items) != len(idx.Items) {
			t.Fatalf("written index does not parse back: %v", err)
		}
	})
}

// FuzzWrappedSecret parses arbitrary wrapped secrets and opens those asking
// for at most 1000 PBKDF2 iterations.
func FuzzWrappedSecret(f *testing.F) {
	s := LinkSecret{6}
	k := LinkKey{7}
	w, _ := wrapLinkKey(s, "pass", 1000, [16]byte{1}, [nonceSize]byte{2}, k)
	f.Add(w)
	f.Add(w[:30])
	f.Add([]byte("SBXP\x03"))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := ParseWrappedSecret(b)
		if err != nil {
			return
		}
		if info.Iterations < 1 || info.Iterations > maxPBKDF2Iterations {
			t.Fatalf("accepted %d iterations", info.Iterations)
		}
		if info.Iterations > 1000 {
			return
		}
		if got, err := OpenWrappedSecret(b, s, "pass"); err == nil && got != k {
			t.Fatal("a wrapped secret opened to another link key")
		}
	})
}

// FuzzManifest parses arbitrary manifests. The only one that can verify is
// the seed itself: anything else accepted would be a second encoding of it,
// or a forgery of its signer's signature.
func FuzzManifest(f *testing.F) {
	_, _, b := testManifest(f)
	f.Add(b)
	f.Add(b[:100])
	f.Fuzz(func(t *testing.T, in []byte) {
		if _, err := ParseManifest(in); err == nil && !bytes.Equal(in, b) {
			t.Fatalf("accepted a manifest other than the one signed: %x", in)
		}
	})
}

// FuzzRecoveryKey parses typed recovery keys: an accepted one is written
// back in a form that parses to the same key.
func FuzzRecoveryKey(f *testing.F) {
	f.Add(RecoveryKey{1}.String())
	f.Add("ABCD-EFGH")
	f.Add("0000 0000 0000 0000 0000 0000 0000 0000")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseRecoveryKey(s)
		if err != nil {
			if !errors.Is(err, ErrRecoveryKey) {
				t.Fatalf("error %v is not ErrRecoveryKey", err)
			}
			return
		}
		if again, err := ParseRecoveryKey(k.String()); err != nil || again != k {
			t.Fatalf("%q: written back as %q, which parses to %x, %v", s, k.String(), again, err)
		}
	})
}

// FuzzFragment parses URL fragments: an accepted one is the only spelling
// of its secret.
func FuzzFragment(f *testing.F) {
	f.Add(LinkSecret{1}.Fragment())
	f.Add("AAAA")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseFragment(s)
		if err == nil && k.Fragment() != s {
			t.Fatalf("fragment %q accepted, but the secret is written %q", s, k.Fragment())
		}
	})
}

// FuzzDeviceSeal opens arbitrary device seals: only the one made for the
// key opens, to its master key.
func FuzzDeviceSeal(f *testing.F) {
	d, err := ParseDeviceKey(seq(32, 0x50))
	if err != nil {
		f.Fatal(err)
	}
	mk := MasterKey{8}
	sealed, _ := SealMasterKeyToDevice(d.PublicKey(), mk)
	f.Add(sealed)
	f.Add(sealed[:40])
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := d.OpenMasterKey(b)
		if err == nil && got != mk {
			t.Fatal("a device seal opened to another master key")
		}
	})
}
