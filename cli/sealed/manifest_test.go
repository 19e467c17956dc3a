package sealed

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
)

func testManifest(t testing.TB) (*Manifest, *Identity, []byte) {
	t.Helper()
	id := IdentitySeed{7}.Identity()
	// A fixed nonce keeps the manifest the same in every process (the fuzz
	// workers build their own).
	aad, _ := albumKeyAAD(vecAlbumID, 0)
	wa := wrapKey(derive([]byte{1}, nil, infoAlbumWrap), aad, AlbumKey{2}, [nonceSize]byte{})
	m := &Manifest{ProtocolVersion: "2026-09-01", AlbumID: vecAlbumID, FileID: vecFileID,
		CiphertextHash: testHash, PlaintextSize: 10, KeyMode: "derived", CreatedByUser: vecUserID,
		CreatedByDevice: vecDeviceID, ClientVersion: "t", Timestamp: "2026-11-27T10:00:00Z",
		Action: "create", AlbumKey: wa}
	b, err := m.Sign(id)
	if err != nil {
		t.Fatal(err)
	}
	return m, id, b
}

// TestManifestRefusesTampering: a changed member, a changed signature, a
// signer swapped and any encoding but the deterministic one are refused.
func TestManifestRefusesTampering(t *testing.T) {
	_, _, b := testManifest(t)
	if _, err := ParseManifest(b); err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := cbor.Unmarshal(b, &generic); err != nil {
		t.Fatal(err)
	}
	reencode := func(edit func(map[string]any)) []byte {
		m := map[string]any{}
		for k, v := range generic {
			m[k] = v
		}
		edit(m)
		out, err := manifestEnc.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if same := reencode(func(map[string]any) {}); !bytes.Equal(same, b) {
		t.Fatal("re-encoding the decoded manifest changed it; the cases below would prove nothing")
	}
	other := IdentitySeed{8}.Identity()
	flipped := bytes.Clone(b)
	flipped[len(flipped)-1] ^= 1 // in the last member's value: a bad value or a bad signature
	for _, c := range []struct {
		name string
		b    []byte
		want error
	}{
		{"plaintext_size changed", reencode(func(m map[string]any) { m["plaintext_size"] = uint64(11) }), ErrAuth},
		{"signature bit flipped", reencode(func(m map[string]any) { s := bytes.Clone(m["sig"].([]byte)); s[100] ^= 1; m["sig"] = s }), ErrAuth},
		{"another signer", reencode(func(m map[string]any) { m["signer"] = other.PublicKey() }), ErrAuth},
		{"no signature", reencode(func(m map[string]any) { delete(m, "sig") }), ErrAuth},
		{"a byte flipped", flipped, nil},
		{"unknown member", reencode(func(m map[string]any) { m["extra"] = "x" }), ErrMalformed},
		{"empty optional member", reencode(func(m map[string]any) { m["retention_until"] = "" }), ErrMalformed},
		{"chunk size 1 MiB", reencode(func(m map[string]any) { m["chunk_size"] = uint64(1 << 20) }), ErrMalformed},
		{"signer not a key", reencode(func(m map[string]any) { m["signer"] = []byte{1} }), ErrMalformed},
		{"trailing byte", append(bytes.Clone(b), 0), ErrMalformed},
		{"truncated", b[:len(b)-1], ErrMalformed},
		{"not canonical (a key order of its own)", nonCanonical(t, generic), ErrMalformed},
	} {
		if _, err := ParseManifest(c.b); err == nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	v2 := reencode(func(m map[string]any) { m["v"] = uint64(2) })
	var ve *VersionError
	if _, err := ParseManifest(v2); !errors.As(err, &ve) || !strings.Contains(err.Error(), "manifest format version 2") {
		t.Errorf("version 2: %v, want a *VersionError naming it", err)
	}
	if _, err := ParseManifest(b); err != nil {
		t.Errorf("the original no longer parses: %v", err)
	}
}

// nonCanonical encodes m with its keys in reverse order (length-first
// sorting reversed), a valid CBOR map that is not core deterministic.
func nonCanonical(t *testing.T, m map[string]any) []byte {
	t.Helper()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(b, a)
	})
	out := []byte{0xb8, byte(len(keys))}
	for _, k := range keys {
		kb, _ := manifestEnc.Marshal(k)
		vb, _ := manifestEnc.Marshal(m[k])
		out = append(append(out, kb...), vb...)
	}
	return out
}

// TestManifestRules: Sign refuses a manifest the server would refuse or a
// reader could not use.
func TestManifestRules(t *testing.T) {
	id := IdentitySeed{7}.Identity()
	for name, edit := range map[string]func(*Manifest){
		"replace without prior":        func(m *Manifest) { m.Action = "replace"; m.OriginalBlobHash = testHash },
		"replace without original":     func(m *Manifest) { m.Action = "replace"; m.PriorProvenanceHash = testHash },
		"create with prior":            func(m *Manifest) { m.PriorProvenanceHash = testHash },
		"wrapped without asset key":    func(m *Manifest) { m.KeyMode = "wrapped" },
		"derived with asset key":       func(m *Manifest) { m.AssetKey = m.AlbumKey },
		"uppercase file id":            func(m *Manifest) { m.FileID = strings.ToUpper(m.FileID) },
		"timestamp not RFC 3339":       func(m *Manifest) { m.Timestamp = "yesterday" },
		"protocol not a date":          func(m *Manifest) { m.ProtocolVersion = "2026-13-01" },
		"client version too long":      func(m *Manifest) { m.ClientVersion = strings.Repeat("x", 129) },
		"action delete":                func(m *Manifest) { m.Action = "delete" },
		"album key missing":            func(m *Manifest) { m.AlbumKey = nil },
		"metadata hash not a hash":     func(m *Manifest) { m.MetadataBlobHash = "abc" },
		"negative plaintext size":      func(m *Manifest) { m.PlaintextSize = -1 },
		"retention not RFC 3339":       func(m *Manifest) { m.RetentionUntil = "2030" },
		"created by device not a UUID": func(m *Manifest) { m.CreatedByDevice = "laptop" },
	} {
		m, _, _ := testManifest(t)
		edit(m)
		if _, err := m.Sign(id); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

// TestEnvelopeJSON: the envelope has exactly the ManifestEnvelope's members
// (server/PROTOCOL.md §9), the optional ones only when the manifest has them.
func TestEnvelopeJSON(t *testing.T) {
	m, _, _ := testManifest(t)
	keys := func(e Envelope) []string {
		b, _ := json.Marshal(e)
		var mm map[string]any
		json.Unmarshal(b, &mm)
		var ks []string
		for k := range mm {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks
	}
	required := []string{"action", "album_id", "amk_version", "chunk_size", "ciphertext_hash", "client_version",
		"created_by_device", "created_by_user", "crypto_suite_id", "file_id", "key_mode", "plaintext_size",
		"protocol_version", "timestamp"}
	if got := keys(m.Envelope()); !slices.Equal(got, required) {
		t.Errorf("create envelope members %v, want %v", got, required)
	}
	m.MetadataBlobHash, m.OriginalBlobHash, m.PriorProvenanceHash, m.RetentionUntil = testHash, testHash, testHash, "2030-01-01T00:00:00Z"
	all := append(slices.Clone(required), "metadata_blob_hash", "original_blob_hash", "prior_provenance_hash", "retention_until")
	slices.Sort(all)
	if got := keys(m.Envelope()); !slices.Equal(got, all) {
		t.Errorf("full envelope members %v, want %v", got, all)
	}
}
