package sealed

import (
	"bytes"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The vectors under testdata/sealed are the format's reference (FORMAT.md
// §12). Tests check them and never write them; -generate-vectors rewrites
// them from their inputs, for a deliberate change of the format only.
var generate = flag.Bool("generate-vectors", false, "rewrite testdata/sealed/*.json from the inputs in vectors_test.go")

const vectorDir = "../../testdata/sealed"

// hexBytes is a byte string written as lowercase hex in the vector files.
type hexBytes []byte

func (h hexBytes) MarshalJSON() ([]byte, error) { return json.Marshal(hex.EncodeToString(h)) }

func (h *hexBytes) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	d, err := hex.DecodeString(s)
	*h = d
	return err
}

// seq returns n bytes counting up from start, the vectors' fixed "random"
// inputs.
func seq(n int, start byte) hexBytes {
	b := make([]byte, n)
	for i := range b {
		b[i] = start + byte(i)
	}
	return b
}

type vectorFile[T any] struct {
	Description string `json:"description"`
	Vectors     []T    `json:"vectors"`
}

// checkVectors checks the file name against build (which computes a vector's
// outputs from its inputs and must reproduce the file byte for byte) and
// open (which opens the outputs and compares them with the inputs). With
// -generate-vectors it first writes the file from seeds.
func checkVectors[T any](t *testing.T, name, description string, seeds []T, build, open func(*testing.T, *T)) {
	t.Helper()
	path := filepath.Join(vectorDir, name)
	if *generate {
		for i := range seeds {
			build(t, &seeds[i])
		}
		b, err := json.MarshalIndent(vectorFile[T]{description, seeds}, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f vectorFile[T]
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(f.Vectors) == 0 {
		t.Fatalf("%s holds no vectors", name)
	}
	for i, v := range f.Vectors {
		got := v
		build(t, &got)
		if !reflect.DeepEqual(got, v) {
			gotJSON, _ := json.Marshal(got)
			wantJSON, _ := json.Marshal(v)
			t.Errorf("%s vector %d: sealing its inputs gives\n%s\nthe file holds\n%s", name, i, gotJSON, wantJSON)
		}
		open(t, &f.Vectors[i])
	}
}

const (
	vecAlbumID  = "0b9f6c1e-2a3d-4e5f-8071-92a3b4c5d6e7"
	vecFileID   = "6f1c2b9e-3d4a-4e5f-8a7b-1c2d3e4f5a6b"
	vecDeviceID = "1a2b3c4d-5e6f-4a0b-9c1d-2e3f4a5b6c7d"
	vecUserID   = "9e8d7c6b-5a49-4838-a726-15f4e3d2c1b0"
)

type deriveVector struct {
	Name string   `json:"name"`
	IKM  hexBytes `json:"ikm_hex"`
	Salt hexBytes `json:"salt_hex"`
	Info string   `json:"info"`
	OKM  hexBytes `json:"okm_hex"`
}

// TestVectorsDerive checks every HKDF derivation of FORMAT.md §2's table,
// each through the package function that uses it, so a label changed in the
// code and not in the document (or the reverse) fails here.
func TestVectorsDerive(t *testing.T) {
	viaPackage := map[string]func(ikm, salt []byte) [KeySize]byte{
		"album-key wrapping key":     func(ikm, _ []byte) [KeySize]byte { return derive(ikm, nil, infoAlbumWrap) },
		"identity-seed wrapping key": func(ikm, _ []byte) [KeySize]byte { return derive(ikm, nil, infoIdentityWrap) },
		"content-hash key":           func(ikm, _ []byte) [KeySize]byte { return derive(ikm, nil, infoContentHMAC) },
		"asset-key wrapping key":     func(ikm, _ []byte) [KeySize]byte { return derive(ikm, nil, infoAssetWrap) },
		"derived asset key": func(ikm, _ []byte) [KeySize]byte {
			k, err := AlbumKey(ikm).DeriveAssetKey(vecFileID)
			if err != nil {
				t.Fatal(err)
			}
			return k
		},
		"role key original":  func(ikm, _ []byte) [KeySize]byte { return AssetKey(ikm).BlobKey(RoleOriginal) },
		"role key companion": func(ikm, _ []byte) [KeySize]byte { return AssetKey(ikm).BlobKey(RoleCompanion) },
		"role key thumbnail": func(ikm, _ []byte) [KeySize]byte { return AssetKey(ikm).BlobKey(RoleThumbnail) },
		"role key preview":   func(ikm, _ []byte) [KeySize]byte { return AssetKey(ikm).BlobKey(RolePreview) },
		"role key metadata":  func(ikm, _ []byte) [KeySize]byte { return AssetKey(ikm).BlobKey(RoleMetadata) },
		"stream key":         func(ikm, salt []byte) [KeySize]byte { return derive(ikm, salt, infoStream) },
		"recovery wrapping key": func(ikm, salt []byte) [KeySize]byte {
			return recoveryKEK(RecoveryKey(ikm), salt)
		},
		"passphrase wrapping key": func(ikm, salt []byte) [KeySize]byte { return derive(ikm, salt, infoShareKEK) },
		"share index key":         func(ikm, _ []byte) [KeySize]byte { return LinkKey(ikm).IndexKey() },
		"escrow slot key":         func(ikm, _ []byte) [KeySize]byte { enc, _ := slotKeys([KeySize]byte(ikm)); return enc },
		"escrow slot commitment":  func(ikm, _ []byte) [KeySize]byte { _, c := slotKeys([KeySize]byte(ikm)); return c },
	}
	hdr := append([]byte("SBXS\x01\x00\x01\x00\x00"), seq(16, 0xa0)...)
	seeds := []deriveVector{
		{Name: "album-key wrapping key", IKM: seq(32, 0x00), Info: infoAlbumWrap},
		{Name: "identity-seed wrapping key", IKM: seq(32, 0x00), Info: infoIdentityWrap},
		{Name: "content-hash key", IKM: seq(32, 0x00), Info: infoContentHMAC},
		{Name: "asset-key wrapping key", IKM: seq(32, 0x20), Info: infoAssetWrap},
		{Name: "derived asset key", IKM: seq(32, 0x20), Info: infoAssetKey + vecFileID},
		{Name: "role key original", IKM: seq(32, 0x40), Info: infoRole + "original"},
		{Name: "role key thumbnail", IKM: seq(32, 0x40), Info: infoRole + "thumbnail"},
		{Name: "role key preview", IKM: seq(32, 0x40), Info: infoRole + "preview"},
		{Name: "role key metadata", IKM: seq(32, 0x40), Info: infoRole + "metadata"},
		{Name: "role key companion", IKM: seq(32, 0x40), Info: infoRole + "companion"},
		{Name: "stream key", IKM: seq(32, 0x60), Salt: hdr, Info: infoStream},
		{Name: "recovery wrapping key", IKM: seq(16, 0x80), Salt: seq(16, 0x90), Info: infoRecovery},
		{Name: "passphrase wrapping key", IKM: seq(32, 0xb0), Salt: seq(32, 0xc0), Info: infoShareKEK},
		{Name: "share index key", IKM: seq(32, 0xc0), Info: infoShareIndex},
		{Name: "escrow slot key", IKM: seq(32, 0xd0), Info: infoSlotKey},
		{Name: "escrow slot commitment", IKM: seq(32, 0xd0), Info: infoSlotCommit},
	}
	build := func(t *testing.T, v *deriveVector) {
		okm := derive(v.IKM, v.Salt, v.Info)
		v.OKM = okm[:]
	}
	open := func(t *testing.T, v *deriveVector) {
		f, ok := viaPackage[v.Name]
		if !ok {
			t.Fatalf("derive vector %q names no derivation of the package", v.Name)
		}
		if got := f(v.IKM, v.Salt); !bytes.Equal(got[:], v.OKM) {
			t.Errorf("%s: the package derives %x, the vector (info %q) %x", v.Name, got, v.Info, v.OKM)
		}
	}
	checkVectors(t, "derive.json", "HKDF-SHA256 derivations of FORMAT.md §2: okm = HKDF(ikm, salt, info), 32 bytes; an empty salt is RFC 5869's default.", seeds, build, open)
}

type contentHMACVector struct {
	MasterKey   hexBytes `json:"master_key_hex"`
	Original    hexBytes `json:"original_hex"`
	ContentHMAC string   `json:"content_hmac"`
}

// TestVectorsContentHMAC checks the metadata's keyed content hash (FORMAT.md §6.3).
func TestVectorsContentHMAC(t *testing.T) {
	seeds := []contentHMACVector{
		{MasterKey: seq(32, 0x00), Original: hexBytes("")},
		{MasterKey: seq(32, 0x00), Original: hexBytes("the bytes of a photo")},
		{MasterKey: seq(32, 0x01), Original: hexBytes("the bytes of a photo")},
	}
	build := func(t *testing.T, v *contentHMACVector) {
		h := NewContentHMAC(MasterKey(v.MasterKey))
		h.Write(v.Original)
		v.ContentHMAC = hex.EncodeToString(h.Sum(nil))
	}
	checkVectors(t, "content-hmac.json", "content_hmac of FORMAT.md §6.3: HMAC-SHA256(HKDF(master key, no salt, \"sealbox/v1/content-hmac\"), original plaintext), lowercase hex.", seeds, build, func(*testing.T, *contentHMACVector) {})
}

type wrapVector struct {
	Name       string   `json:"name"`
	ParentKey  hexBytes `json:"parent_key_hex"`
	AlbumID    string   `json:"album_id"`
	FileID     string   `json:"file_id,omitempty"`
	AMKVersion uint64   `json:"amk_version"`
	Key        hexBytes `json:"key_hex"`
	Nonce      hexBytes `json:"nonce_hex"`
	Wrapped    hexBytes `json:"wrapped_hex"`
}

// TestVectorsWrappedKey checks album keys wrapped under the master key and
// asset keys wrapped under the album key (FORMAT.md §3.1–§3.3).
func TestVectorsWrappedKey(t *testing.T) {
	seeds := []wrapVector{
		{Name: "album key", ParentKey: seq(32, 0x00), AlbumID: vecAlbumID, AMKVersion: 0, Key: seq(32, 0x20), Nonce: seq(12, 0xf0)},
		{Name: "album key", ParentKey: seq(32, 0x00), AlbumID: vecAlbumID, AMKVersion: 12, Key: seq(32, 0x21), Nonce: seq(12, 0xf1)},
		{Name: "asset key", ParentKey: seq(32, 0x20), AlbumID: vecAlbumID, FileID: vecFileID, Key: seq(32, 0x40), Nonce: seq(12, 0xf2)},
	}
	build := func(t *testing.T, v *wrapVector) {
		var err error
		var aad []byte
		var kek [KeySize]byte
		if v.Name == "album key" {
			aad, err = albumKeyAAD(v.AlbumID, v.AMKVersion)
			kek = derive(v.ParentKey, nil, infoAlbumWrap)
		} else {
			aad, err = assetKeyAAD(v.AlbumID, v.FileID)
			kek = derive(v.ParentKey, nil, infoAssetWrap)
		}
		if err != nil {
			t.Fatal(err)
		}
		v.Wrapped = wrapKey(kek, aad, [KeySize]byte(v.Key), [nonceSize]byte(v.Nonce))
	}
	open := func(t *testing.T, v *wrapVector) {
		var got [KeySize]byte
		var err error
		if v.Name == "album key" {
			got, err = MasterKey(v.ParentKey).UnwrapAlbumKey(v.AlbumID, v.AMKVersion, v.Wrapped)
		} else {
			got, err = AlbumKey(v.ParentKey).UnwrapAssetKey(v.AlbumID, v.FileID, v.Wrapped)
		}
		if err != nil || !bytes.Equal(got[:], v.Key) {
			t.Errorf("%s: unwrap gives %x, %v; want %x", v.Name, got, err, v.Key)
		}
	}
	checkVectors(t, "wrapped-key.json", "Wrapped keys of FORMAT.md §3.1: parent_key is the master key (album key) or the album key (asset key).", seeds, build, open)
}

type rangeVector struct {
	PlainOffset  int64 `json:"plaintext_offset"`
	PlainLength  int64 `json:"plaintext_length"`
	SealedOffset int64 `json:"sealed_offset"`
	SealedLength int64 `json:"sealed_length"`
}

type streamVector struct {
	BlobKey      hexBytes      `json:"blob_key_hex"`
	Salt         hexBytes      `json:"salt_hex"`
	Length       int64         `json:"plaintext_length"`
	SealedSize   int64         `json:"sealed_size"`
	SealedSHA256 string        `json:"sealed_sha256"`
	Sealed       hexBytes      `json:"sealed_hex,omitempty"`
	Ranges       []rangeVector `json:"ranges"`
}

// plainRule is the stream vectors' plaintext (FORMAT.md §12.1).
func plainRule(n int64) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(j % 251)
	}
	return b
}

// TestVectorsStream checks streams at the chunk boundaries (FORMAT.md §4)
// and the sealed spans of plaintext ranges, decrypting each range from its
// span alone.
func TestVectorsStream(t *testing.T) {
	var seeds []streamVector
	for i, n := range []int64{0, 1, 100, ChunkSize - 1, ChunkSize, ChunkSize + 1, 200_000} {
		v := streamVector{BlobKey: seq(32, 0x60), Salt: seq(16, byte(0xa0+i)), Length: n}
		for _, r := range [][2]int64{{0, 1}, {n / 2, 70_000}, {ChunkSize - 3, 6}, {n - 1, 1}} {
			if r[0] >= 0 && r[0] < n {
				v.Ranges = append(v.Ranges, rangeVector{PlainOffset: r[0], PlainLength: min(r[1], n-r[0])})
			}
		}
		seeds = append(seeds, v)
	}
	build := func(t *testing.T, v *streamVector) {
		sealed := sealBytes(BlobKey(v.BlobKey), plainRule(v.Length), [16]byte(v.Salt))
		v.SealedSize = int64(len(sealed))
		sum := sha256.Sum256(sealed)
		v.SealedSHA256 = hex.EncodeToString(sum[:])
		v.Sealed = nil
		if len(sealed) <= 256 {
			v.Sealed = sealed
		}
		rs := make([]rangeVector, len(v.Ranges))
		for i, r := range v.Ranges {
			off, n := CiphertextSpan(v.Length, r.PlainOffset, r.PlainLength)
			rs[i] = rangeVector{r.PlainOffset, r.PlainLength, off, n}
		}
		v.Ranges = rs
	}
	open := func(t *testing.T, v *streamVector) {
		sealed := sealBytes(BlobKey(v.BlobKey), plainRule(v.Length), [16]byte(v.Salt))
		r, err := NewReader(BlobKey(v.BlobKey), bytes.NewReader(sealed))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(got, plainRule(v.Length)) {
			t.Errorf("stream of %d bytes does not open to its plaintext: %v", v.Length, err)
		}
		for _, rg := range v.Ranges {
			src := &spanOnly{t: t, b: sealed, off: rg.SealedOffset, n: rg.SealedLength}
			ra, err := NewReaderAt(BlobKey(v.BlobKey), src, v.SealedSize)
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, rg.PlainLength)
			if n, err := ra.ReadAt(buf, rg.PlainOffset); n != len(buf) || err != nil {
				t.Fatalf("range %+v: read %d, %v", rg, n, err)
			}
			if want := plainRule(v.Length)[rg.PlainOffset : rg.PlainOffset+rg.PlainLength]; !bytes.Equal(buf, want) {
				t.Errorf("range %+v of %d bytes: wrong plaintext", rg, v.Length)
			}
		}
	}
	checkVectors(t, "stream.json", "Sealed streams of FORMAT.md §4. Plaintext byte j is j mod 251 (§12.1); sealed_hex is given when the stream is at most 256 bytes, sealed_sha256 always. Each range gives the sealed bytes that decrypt a plaintext range.", seeds, build, open)
}

// spanOnly is an io.ReaderAt over a sealed stream that fails the test on any
// read outside the header and one span: proof that a range decrypts from its
// span alone.
type spanOnly struct {
	t      *testing.T
	b      []byte
	off, n int64
}

func (s *spanOnly) ReadAt(p []byte, off int64) (int, error) {
	end := off + int64(len(p))
	if !(off == 0 && end <= HeaderSize) && !(off >= s.off && end <= s.off+s.n) {
		s.t.Errorf("read of [%d, %d) outside the header and the span [%d, %d)", off, end, s.off, s.off+s.n)
	}
	return bytes.NewReader(s.b).ReadAt(p, off)
}

type escrowVector struct {
	MasterKey    hexBytes    `json:"master_key_hex"`
	IdentitySeed hexBytes    `json:"identity_seed_hex"`
	Passphrase   string      `json:"passphrase"`
	RecoveryKey  string      `json:"recovery_key"`
	Time         uint32      `json:"argon2_t"`
	MemoryKiB    uint32      `json:"argon2_m_kib"`
	Threads      uint8       `json:"argon2_p"`
	Salt         hexBytes    `json:"salt_hex"`
	Nonces       [3]hexBytes `json:"slot_nonces_hex"`
	Escrow       hexBytes    `json:"escrow_hex"`
}

// TestVectorsEscrow checks an escrow (FORMAT.md §5) made with small Argon2id
// parameters, opened by passphrase and by recovery key.
func TestVectorsEscrow(t *testing.T) {
	seeds := []escrowVector{{
		MasterKey: seq(32, 0x00), IdentitySeed: seq(32, 0x33), Passphrase: "correct horse battery staple",
		RecoveryKey: RecoveryKey(seq(16, 0x80)).String(), Time: 1, MemoryKiB: 64, Threads: 1,
		Salt: seq(16, 0x90), Nonces: [3]hexBytes{seq(12, 0xd0), seq(12, 0xe0), seq(12, 0xf0)},
	}}
	build := func(t *testing.T, v *escrowVector) {
		rk, err := ParseRecoveryKey(v.RecoveryKey)
		if err != nil {
			t.Fatal(err)
		}
		s := AccountSecrets{Master: MasterKey(v.MasterKey), Identity: IdentitySeed(v.IdentitySeed)}
		var nonces [3][nonceSize]byte
		for i := range nonces {
			nonces[i] = [nonceSize]byte(v.Nonces[i])
		}
		v.Escrow, err = newEscrow(s, v.Passphrase, rk, Argon2Params{v.Time, v.MemoryKiB, v.Threads}, [16]byte(v.Salt), nonces)
		if err != nil {
			t.Fatal(err)
		}
	}
	open := func(t *testing.T, v *escrowVector) {
		want := AccountSecrets{Master: MasterKey(v.MasterKey), Identity: IdentitySeed(v.IdentitySeed)}
		if got, err := OpenEscrowWithPassphrase(v.Escrow, v.Passphrase); err != nil || got != want {
			t.Errorf("escrow by passphrase: %v", err)
		}
		rk, _ := ParseRecoveryKey(v.RecoveryKey)
		if got, err := OpenEscrowWithRecoveryKey(v.Escrow, rk); err != nil || got != want {
			t.Errorf("escrow by recovery key: %v", err)
		}
	}
	checkVectors(t, "escrow.json", "Escrow blobs of FORMAT.md §5, with Argon2id parameters below the writer's floor so the vector runs fast (readers accept them).", seeds, build, open)
}

type recoveryVector struct {
	Key     hexBytes `json:"key_hex"`
	Text    string   `json:"text"`
	Typed   []string `json:"also_accepted"`
	Refused []string `json:"refused"`
}

// TestVectorsRecoveryKey checks the written form of recovery keys
// (FORMAT.md §5.2), what a reader accepts as typed, and the typos it refuses.
func TestVectorsRecoveryKey(t *testing.T) {
	seeds := []recoveryVector{
		{Key: seq(16, 0x00)},
		{Key: seq(16, 0x80)},
		{Key: hexBytes(bytes.Repeat([]byte{0xff}, 16))},
	}
	build := func(t *testing.T, v *recoveryVector) {
		v.Text = RecoveryKey(v.Key).String()
		if v.Typed != nil {
			return
		}
		plain := strings.ReplaceAll(v.Text, "-", "")
		v.Typed = []string{strings.ToLower(v.Text), plain, strings.ReplaceAll(v.Text, "-", " ")}
		if strings.ContainsAny(plain, "01") {
			v.Typed = append(v.Typed, strings.NewReplacer("0", "O", "1", "l").Replace(v.Text))
		}
		flip := []byte(v.Text)
		if flip[5] == 'A' {
			flip[5] = 'B'
		} else {
			flip[5] = 'A'
		}
		v.Refused = []string{string(flip), v.Text[:len(v.Text)-1], v.Text + "0", strings.Replace(v.Text, v.Text[:1], "U", 1)}
	}
	open := func(t *testing.T, v *recoveryVector) {
		for _, s := range append([]string{v.Text}, v.Typed...) {
			if k, err := ParseRecoveryKey(s); err != nil || !bytes.Equal(k[:], v.Key) {
				t.Errorf("ParseRecoveryKey(%q) = %x, %v; want %x", s, k, err, v.Key)
			}
		}
		for _, s := range v.Refused {
			if _, err := ParseRecoveryKey(s); err != ErrRecoveryKey {
				t.Errorf("ParseRecoveryKey(%q): %v, want ErrRecoveryKey", s, err)
			}
		}
	}
	checkVectors(t, "recovery-key.json", "Recovery keys of FORMAT.md §5.2: text is the written form; also_accepted are typings a reader reads as the same key; refused are typos it refuses.", seeds, build, open)
}

type metadataVector struct {
	AssetKey     hexBytes `json:"asset_key_hex"`
	Salt         hexBytes `json:"salt_hex"`
	Document     string   `json:"document"`
	PaddedLength int      `json:"padded_length"`
	Sealed       hexBytes `json:"sealed_hex"`
}

// TestVectorsMetadata checks metadata documents (FORMAT.md §6): the canonical
// JSON a writer produces, its padding, and the sealed blob.
func TestVectorsMetadata(t *testing.T) {
	h := strings.Repeat("ab", 32)
	seeds := []metadataVector{
		{AssetKey: seq(32, 0x40), Salt: seq(16, 0x10), Document: `{"blobs":{"original":{"hash":"` + h + `","size":0}},"content_hmac":"` + h + `","media_type":"application/octet-stream","name":"empty.bin","size":0,"v":1}`},
		{AssetKey: seq(32, 0x40), Salt: seq(16, 0x11), Document: `{"blobs":{"original":{"hash":"` + h + `","size":3021554},"preview":{"hash":"` + strings.Repeat("cd", 32) + `","size":220113},"thumbnail":{"hash":"` + strings.Repeat("ef", 32) + `","size":9120}},"content_hmac":"` + h + `","height":3024,"location":{"alt":35.5,"lat":48.858222,"lon":2.2945},"media_type":"image/jpeg","name":"IMG_0042 <Paris & co>.jpg","size":3021554,"taken":{"local":"2026-05-01T10:15:30.25","offset_minutes":120,"source":"exif"},"v":1,"width":4032,"x-future":{"kept":[1,2,"three"]}}`},
		{AssetKey: seq(32, 0x41), Salt: seq(16, 0x12), Document: `{"blobs":{"original":{"hash":"` + h + `","size":52000000}},"content_hmac":"` + h + `","duration_ms":61500,"media_type":"video/mp4","name":"VID_20260501_101530.mp4","size":52000000,"taken":{"local":"2026-05-01T10:15:30","source":"filename"},"v":1}`},
		// A Live Photo: its still, its video as the companion, and a sidecar.
		{AssetKey: seq(32, 0x42), Salt: seq(16, 0x13), Document: `{"blobs":{"companion":{"hash":"` + strings.Repeat("12", 32) + `","size":2811000},"original":{"hash":"` + h + `","size":1520000}},"companion":{"content_hmac":"` + strings.Repeat("34", 32) + `","media_type":"video/quicktime","name":"IMG_0001.MOV","size":2811000},"content_hmac":"` + h + `","media_type":"image/heic","name":"IMG_0001.HEIC","sidecars":[{"data":"PHg6eG1wbWV0YS8+Cg==","name":"IMG_0001.xmp"}],"size":1520000,"taken":{"local":"2026-05-01T10:15:30","offset_minutes":-300,"source":"xmp"},"v":1}`},
	}
	build := func(t *testing.T, v *metadataVector) {
		m, err := ParseMetadata([]byte(v.Document))
		if err != nil {
			t.Fatal(err)
		}
		padded, err := EncodeMetadata(m)
		if err != nil {
			t.Fatal(err)
		}
		v.Document = string(bytes.TrimRight(padded, " "))
		v.PaddedLength = len(padded)
		v.Sealed = sealBytes(AssetKey(v.AssetKey).BlobKey(RoleMetadata), padded, [16]byte(v.Salt))
	}
	open := func(t *testing.T, v *metadataVector) {
		m, err := OpenMetadata(AssetKey(v.AssetKey), v.Sealed)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := EncodeMetadata(m)
		if string(bytes.TrimRight(again, " ")) != v.Document || len(again) != v.PaddedLength {
			t.Errorf("metadata opened and written again differs:\n%s\nwant\n%s", again, v.Document)
		}
	}
	checkVectors(t, "metadata.json", "Metadata blobs of FORMAT.md §6: document is the writer's canonical JSON, padded with spaces to padded_length and sealed as a stream under the asset's metadata role key with salt.", seeds, build, open)
}

type manifestVector struct {
	IdentitySeed  hexBytes `json:"identity_seed_hex"`
	MasterKey     hexBytes `json:"master_key_hex"`
	AlbumKey      hexBytes `json:"album_key_hex"`
	AlbumKeyNonce hexBytes `json:"album_key_nonce_hex"`
	AssetKey      hexBytes `json:"asset_key_hex,omitempty"`
	AssetKeyNonce hexBytes `json:"asset_key_nonce_hex,omitempty"`
	Envelope      Envelope `json:"envelope"`
	ManifestCBOR  hexBytes `json:"manifest_cbor_hex"`
	ManifestHash  string   `json:"manifest_hash"`
}

func manifestFromEnvelope(e Envelope) *Manifest {
	val := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	return &Manifest{
		ProtocolVersion: e.ProtocolVersion, AlbumID: e.AlbumID, FileID: e.FileID,
		AMKVersion: e.AMKVersion, CiphertextHash: e.CiphertextHash, PlaintextSize: e.PlaintextSize,
		KeyMode: e.KeyMode, MetadataBlobHash: val(e.MetadataBlobHash),
		OriginalBlobHash: val(e.OriginalBlobHash), CreatedByUser: e.CreatedByUser,
		CreatedByDevice: e.CreatedByDevice, ClientVersion: e.ClientVersion, Timestamp: e.Timestamp,
		Action: e.Action, PriorProvenanceHash: val(e.PriorProvenanceHash), RetentionUntil: val(e.RetentionUntil),
	}
}

// TestVectorsManifest checks signed manifests (FORMAT.md §7): a create with
// a derived key and a replace with a wrapped one continuing its chain.
func TestVectorsManifest(t *testing.T) {
	str := func(s string) *string { return &s }
	create := Envelope{
		CryptoSuiteID: 1, ProtocolVersion: "2026-09-01", AlbumID: vecAlbumID, FileID: vecFileID,
		CiphertextHash: strings.Repeat("ab", 32), PlaintextSize: 3021554, ChunkSize: ChunkSize,
		KeyMode: "derived", MetadataBlobHash: str(strings.Repeat("cd", 32)),
		CreatedByUser: vecUserID, CreatedByDevice: vecDeviceID, ClientVersion: "sealbox-client/0.1.0",
		Timestamp: "2026-11-27T10:00:00Z", Action: "create",
	}
	replace := create
	replace.AMKVersion = 3
	replace.KeyMode = "wrapped"
	replace.CiphertextHash = strings.Repeat("12", 32)
	replace.OriginalBlobHash = str(strings.Repeat("12", 32))
	replace.Action = "replace"
	replace.Timestamp = "2026-11-27T11:30:00+01:00"
	replace.RetentionUntil = str("2030-01-01T00:00:00Z")
	seeds := []manifestVector{
		{IdentitySeed: seq(32, 0x00), MasterKey: seq(32, 0x00), AlbumKey: seq(32, 0x20), AlbumKeyNonce: seq(12, 0xf0), Envelope: create},
		{IdentitySeed: seq(32, 0x00), MasterKey: seq(32, 0x00), AlbumKey: seq(32, 0x21), AlbumKeyNonce: seq(12, 0xf1),
			AssetKey: seq(32, 0x40), AssetKeyNonce: seq(12, 0xf2), Envelope: replace},
	}
	var prior string // the first vector's hash, the second's prior_provenance_hash
	build := func(t *testing.T, v *manifestVector) {
		if v.Envelope.Action == "replace" && *generate {
			v.Envelope.PriorProvenanceHash = str(prior)
		}
		m := manifestFromEnvelope(v.Envelope)
		aad, _ := albumKeyAAD(m.AlbumID, m.AMKVersion)
		m.AlbumKey = wrapKey(derive(v.MasterKey, nil, infoAlbumWrap), aad, [KeySize]byte(v.AlbumKey), [nonceSize]byte(v.AlbumKeyNonce))
		if m.KeyMode == "wrapped" {
			aad, _ := assetKeyAAD(m.AlbumID, m.FileID)
			m.AssetKey = wrapKey(derive(v.AlbumKey, nil, infoAssetWrap), aad, [KeySize]byte(v.AssetKey), [nonceSize]byte(v.AssetKeyNonce))
		}
		b, err := m.Sign(IdentitySeed(v.IdentitySeed).Identity())
		if err != nil {
			t.Fatal(err)
		}
		v.ManifestCBOR = b
		v.ManifestHash = ManifestHash(b)
		v.Envelope = m.Envelope()
		prior = v.ManifestHash
	}
	open := func(t *testing.T, v *manifestVector) {
		m, err := ParseManifest(v.ManifestCBOR)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(m.Envelope(), v.Envelope) {
			t.Errorf("envelope of the parsed manifest differs from the vector's")
		}
		if !bytes.Equal(m.Signer, IdentitySeed(v.IdentitySeed).Identity().PublicKey()) {
			t.Error("manifest signer is not the identity key of the seed")
		}
		ak, err := MasterKey(v.MasterKey).UnwrapAlbumKey(m.AlbumID, m.AMKVersion, m.AlbumKey)
		if err != nil || !bytes.Equal(ak[:], v.AlbumKey) {
			t.Errorf("album_key does not unwrap to the album key: %v", err)
		}
		if m.KeyMode == "wrapped" {
			k, err := ak.UnwrapAssetKey(m.AlbumID, m.FileID, m.AssetKey)
			if err != nil || !bytes.Equal(k[:], v.AssetKey) {
				t.Errorf("asset_key does not unwrap to the asset key: %v", err)
			}
		}
	}
	checkVectors(t, "manifest.json", "Signed manifests of FORMAT.md §7: manifest_cbor is core deterministic CBOR signed by the identity key of identity_seed (§8); envelope is the op's manifest_envelope. The second vector continues the first's chain.", seeds, build, open)
}

type shareVector struct {
	LinkSecret    hexBytes `json:"link_secret_hex"`
	Fragment      string   `json:"fragment"`
	Passphrase    string   `json:"passphrase,omitempty"`
	Iterations    uint32   `json:"pbkdf2_iterations,omitempty"`
	Salt          hexBytes `json:"salt_hex,omitempty"`
	Nonce         hexBytes `json:"nonce_hex,omitempty"`
	PBKDF2        hexBytes `json:"pbkdf2_output_hex,omitempty"`
	WrappedSecret hexBytes `json:"wrapped_secret_hex,omitempty"`
	LinkKey       hexBytes `json:"link_key_hex"`
	Index         string   `json:"index"`
	IndexSalt     hexBytes `json:"index_salt_hex"`
	IndexSealed   hexBytes `json:"index_sealed_hex"`
}

// TestVectorsShare checks share material (FORMAT.md §9): a link without a
// passphrase and one with, its wrapped secret made with few PBKDF2
// iterations, and each link's sealed index.
func TestVectorsShare(t *testing.T) {
	idx := `{"items":[{"asset_key":"` + b64Key(AssetKey(seq(32, 0x40))) + `","file_id":"` + vecFileID + `","metadata_hash":"` + strings.Repeat("cd", 32) + `"}],"title":"Paris, May 2026","v":1}`
	seeds := []shareVector{
		{LinkSecret: seq(32, 0xb0), LinkKey: seq(32, 0xb0), Index: idx, IndexSalt: seq(16, 0x01)},
		{LinkSecret: seq(32, 0xb1), Passphrase: "tour eiffel", Iterations: 1000, Salt: seq(16, 0x02), Nonce: seq(12, 0x03),
			LinkKey: seq(32, 0xc0), Index: `{"items":[],"v":1}`, IndexSalt: seq(16, 0x04)},
	}
	build := func(t *testing.T, v *shareVector) {
		v.Fragment = LinkSecret(v.LinkSecret).Fragment()
		if v.Passphrase != "" {
			p, _ := pbkdf2.Key(sha256.New, v.Passphrase, v.Salt, int(v.Iterations), KeySize)
			v.PBKDF2 = p
			w, err := wrapLinkKey(LinkSecret(v.LinkSecret), v.Passphrase, v.Iterations, [16]byte(v.Salt), [nonceSize]byte(v.Nonce), LinkKey(v.LinkKey))
			if err != nil {
				t.Fatal(err)
			}
			v.WrappedSecret = w
		}
		i, err := ParseShareIndex([]byte(v.Index))
		if err != nil {
			t.Fatal(err)
		}
		padded, err := EncodeShareIndex(i)
		if err != nil {
			t.Fatal(err)
		}
		v.Index = string(bytes.TrimRight(padded, " "))
		v.IndexSealed = sealBytes(LinkKey(v.LinkKey).IndexKey(), padded, [16]byte(v.IndexSalt))
	}
	open := func(t *testing.T, v *shareVector) {
		s, err := ParseFragment(v.Fragment)
		if err != nil || !bytes.Equal(s[:], v.LinkSecret) {
			t.Fatalf("fragment %q: %x, %v", v.Fragment, s, err)
		}
		k := s.Key()
		if v.Passphrase != "" {
			if k, err = OpenWrappedSecret(v.WrappedSecret, s, v.Passphrase); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(k[:], v.LinkKey) {
			t.Errorf("link key %x, want %x", k, v.LinkKey)
		}
		i, err := OpenShareIndex(k, v.IndexSealed)
		if err != nil {
			t.Fatal(err)
		}
		if again, _ := EncodeShareIndex(i); string(bytes.TrimRight(again, " ")) != v.Index {
			t.Errorf("share index opened and written again differs: %s", again)
		}
	}
	checkVectors(t, "share.json", "Share links of FORMAT.md §9: fragment is the URL fragment of link_secret; with a passphrase, wrapped_secret holds link_key (pbkdf2_output is the intermediate PBKDF2 value, given to help debugging); index is sealed under HKDF(link key, no salt, \"sealbox/v1/share:index\").", seeds, build, open)
}

// b64Key is an asset key as a share index writes it (FORMAT.md §9.3).
func b64Key(k AssetKey) string { return base64.RawURLEncoding.EncodeToString(k[:]) }

type deviceVector struct {
	DevicePrivate hexBytes `json:"device_private_key_hex"`
	DevicePublic  hexBytes `json:"device_public_key_hex"`
	MasterKey     hexBytes `json:"master_key_hex"`
	Sealed        hexBytes `json:"sealed_hex"`
}

// TestVectorsDeviceSeal checks master keys sealed to a device with HPKE
// (FORMAT.md §10). HPKE draws its ephemeral key itself, so these vectors go
// one way: the file's sealed bytes must open to the master key; the
// generator seals afresh.
func TestVectorsDeviceSeal(t *testing.T) {
	seeds := []deviceVector{
		{DevicePrivate: seq(32, 0x50), MasterKey: seq(32, 0x00)},
		{DevicePrivate: seq(32, 0x70), MasterKey: seq(32, 0x99)},
	}
	build := func(t *testing.T, v *deviceVector) {
		d, err := ParseDeviceKey(v.DevicePrivate)
		if err != nil {
			t.Fatal(err)
		}
		v.DevicePublic = d.PublicKey()
		if v.Sealed == nil { // only while generating: a committed vector keeps its bytes
			v.Sealed, err = SealMasterKeyToDevice(v.DevicePublic, MasterKey(v.MasterKey))
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	open := func(t *testing.T, v *deviceVector) {
		d, _ := ParseDeviceKey(v.DevicePrivate)
		if mk, err := d.OpenMasterKey(v.Sealed); err != nil || !bytes.Equal(mk[:], v.MasterKey) {
			t.Errorf("device seal opens to %x, %v; want %x", mk, err, v.MasterKey)
		}
	}
	checkVectors(t, "device-seal.json", "Master keys sealed to a device (FORMAT.md §10): HPKE base mode, DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-256-GCM, info \"sealbox/v1/device-seal:master-key\", AAD the 5 header bytes. sealed must open with the device private key to master_key.", seeds, build, open)
}

type loginVector struct {
	Email    string   `json:"email"`
	Password string   `json:"password"`
	Salt     hexBytes `json:"salt_hex"`
	Secret   string   `json:"secret"`
}

// TestVectorsLoginSecret: the login secret of FORMAT.md §5.3, its salt from
// the normalised email (the second vector's address is the first's as
// typed with spaces and capitals, so both give one secret).
func TestVectorsLoginSecret(t *testing.T) {
	seeds := []loginVector{
		{Email: "alice@example.org", Password: "correct horse battery staple"},
		{Email: "  Alice@Example.ORG ", Password: "correct horse battery staple"},
		{Email: "bob@example.org", Password: "pässwörd ✓"},
	}
	build := func(t *testing.T, v *loginVector) {
		v.Salt = loginSalt(v.Email)
		v.Secret = LoginSecret(v.Email, v.Password)
	}
	open := func(t *testing.T, v *loginVector) {
		if got := LoginSecret(v.Email, v.Password); got != v.Secret || !strings.HasPrefix(got, "sbx1-") || len(got) != 48 {
			t.Errorf("LoginSecret(%q): %q, want %q (48 characters)", v.Email, got, v.Secret)
		}
		if got := LoginSecret(v.Email, v.Password+"x"); got == v.Secret {
			t.Errorf("another password gives the same secret")
		}
	}
	checkVectors(t, "login-secret.json", "FORMAT.md §5.3: the login secret a client sends as the account's password.", seeds, build, open)
}
