package sealed

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/fxamacker/cbor/v2"

	"sealbox/server/hybridsig"
)

// CryptoSuiteID is the envelope's crypto_suite_id of everything this package
// seals (FORMAT.md §7.3).
const CryptoSuiteID = 1

const manifestPurpose = "sealbox/manifest/v1"

// Manifest is a signed lifecycle manifest (FORMAT.md §7). Its fields are the
// ManifestEnvelope's, plus the wrapped keys a device needs to open the asset,
// plus the signer. Optional strings are "" when absent.
type Manifest struct {
	ProtocolVersion     string // YYYY-MM-DD
	AlbumID             string // canonical lowercase UUID
	FileID              string // canonical lowercase UUID
	AMKVersion          uint64
	CiphertextHash      string // the original's sealed blob
	PlaintextSize       int64  // the original's plaintext size
	KeyMode             string // "derived" or "wrapped"
	MetadataBlobHash    string
	OriginalBlobHash    string
	CreatedByUser       string
	CreatedByDevice     string // canonical lowercase UUID
	ClientVersion       string
	Timestamp           string // RFC 3339
	Action              string // "create" or "replace"
	PriorProvenanceHash string
	RetentionUntil      string // RFC 3339
	AlbumKey            []byte // the album key wrapped under the master key (§3.2)
	AssetKey            []byte // key_mode "wrapped": the asset key wrapped under the album key (§3.3)
	Signer              []byte // the signer's 1984-byte hybrid public key
	sig                 []byte
}

// manifestWire is the CBOR map; core deterministic encoding sorts its keys.
type manifestWire struct {
	Action              string `cbor:"action"`
	AlbumID             string `cbor:"album_id"`
	AlbumKey            []byte `cbor:"album_key"`
	AMKVersion          uint64 `cbor:"amk_version"`
	AssetKey            []byte `cbor:"asset_key,omitempty"`
	ChunkSize           int64  `cbor:"chunk_size"`
	CiphertextHash      string `cbor:"ciphertext_hash"`
	ClientVersion       string `cbor:"client_version"`
	CreatedByDevice     string `cbor:"created_by_device"`
	CreatedByUser       string `cbor:"created_by_user"`
	CryptoSuiteID       int64  `cbor:"crypto_suite_id"`
	FileID              string `cbor:"file_id"`
	KeyMode             string `cbor:"key_mode"`
	MetadataBlobHash    string `cbor:"metadata_blob_hash,omitempty"`
	OriginalBlobHash    string `cbor:"original_blob_hash,omitempty"`
	PlaintextSize       int64  `cbor:"plaintext_size"`
	PriorProvenanceHash string `cbor:"prior_provenance_hash,omitempty"`
	ProtocolVersion     string `cbor:"protocol_version"`
	Purpose             string `cbor:"purpose"`
	RetentionUntil      string `cbor:"retention_until,omitempty"`
	Sig                 []byte `cbor:"sig,omitempty"`
	Signer              []byte `cbor:"signer"`
	Timestamp           string `cbor:"timestamp"`
	V                   int64  `cbor:"v"`
}

var (
	manifestEnc = mustEnc(cbor.CoreDetEncOptions())
	manifestDec = mustDec(cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsForbidden,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
		MaxNestedLevels:   4,
	})
)

func mustEnc(o cbor.EncOptions) cbor.EncMode {
	m, err := o.EncMode()
	if err != nil {
		panic("sealed: cbor: " + err.Error())
	}
	return m
}

func mustDec(o cbor.DecOptions) cbor.DecMode {
	m, err := o.DecMode()
	if err != nil {
		panic("sealed: cbor: " + err.Error())
	}
	return m
}

func (m *Manifest) wire() manifestWire {
	return manifestWire{
		Action: m.Action, AlbumID: m.AlbumID, AlbumKey: m.AlbumKey, AMKVersion: m.AMKVersion,
		AssetKey: m.AssetKey, ChunkSize: ChunkSize, CiphertextHash: m.CiphertextHash,
		ClientVersion: m.ClientVersion, CreatedByDevice: m.CreatedByDevice,
		CreatedByUser: m.CreatedByUser, CryptoSuiteID: CryptoSuiteID, FileID: m.FileID,
		KeyMode: m.KeyMode, MetadataBlobHash: m.MetadataBlobHash,
		OriginalBlobHash: m.OriginalBlobHash, PlaintextSize: m.PlaintextSize,
		PriorProvenanceHash: m.PriorProvenanceHash, ProtocolVersion: m.ProtocolVersion,
		Purpose: manifestPurpose, RetentionUntil: m.RetentionUntil, Signer: m.Signer,
		Timestamp: m.Timestamp, V: 1,
	}
}

// Sign fills m.Signer with id's public key and returns manifest_cbor: the
// manifest with its "sig" member, core deterministic CBOR. The signature
// covers the same map without "sig".
func (m *Manifest) Sign(id *Identity) ([]byte, error) {
	m.Signer = id.PublicKey()
	if err := m.validate(); err != nil {
		return nil, err
	}
	w := m.wire()
	unsigned, err := manifestEnc.Marshal(w)
	if err != nil {
		return nil, err
	}
	w.Sig = id.Sign(unsigned)
	return manifestEnc.Marshal(w)
}

// ParseManifest reads manifest_cbor and checks its signature against the
// signer it names. It refuses any encoding but the core deterministic one.
// The caller compares Signer with the account's pinned identity key.
func ParseManifest(b []byte) (*Manifest, error) {
	var w manifestWire
	if err := manifestDec.Unmarshal(b, &w); err != nil {
		return nil, malformed("manifest is not the manifest map: %v", err)
	}
	if w.V != 1 {
		return nil, &VersionError{Object: "manifest", Version: int(w.V)}
	}
	if w.Purpose != manifestPurpose || w.CryptoSuiteID != CryptoSuiteID || w.ChunkSize != ChunkSize {
		return nil, malformed("manifest purpose, crypto_suite_id or chunk_size not those of version 1")
	}
	if again, err := manifestEnc.Marshal(w); err != nil || !bytes.Equal(again, b) {
		return nil, malformed("manifest is not in core deterministic CBOR, or has empty optional members")
	}
	m := &Manifest{
		ProtocolVersion: w.ProtocolVersion, AlbumID: w.AlbumID, FileID: w.FileID,
		AMKVersion: w.AMKVersion, CiphertextHash: w.CiphertextHash, PlaintextSize: w.PlaintextSize,
		KeyMode: w.KeyMode, MetadataBlobHash: w.MetadataBlobHash, OriginalBlobHash: w.OriginalBlobHash,
		CreatedByUser: w.CreatedByUser, CreatedByDevice: w.CreatedByDevice,
		ClientVersion: w.ClientVersion, Timestamp: w.Timestamp, Action: w.Action,
		PriorProvenanceHash: w.PriorProvenanceHash, RetentionUntil: w.RetentionUntil,
		AlbumKey: w.AlbumKey, AssetKey: w.AssetKey, Signer: w.Signer,
	}
	if err := m.validate(); err != nil {
		return nil, err
	}
	pk, err := hybridsig.ParsePublicKey(w.Signer)
	if err != nil {
		return nil, malformed("manifest signer is not a hybrid public key")
	}
	sig := w.Sig
	w.Sig = nil
	unsigned, err := manifestEnc.Marshal(w)
	if err != nil {
		return nil, err
	}
	if pk.Verify(unsigned, sig) != nil {
		return nil, ErrAuth
	}
	return m, nil
}

// ManifestHash is the manifest's content address: SHA-256 of manifest_cbor in
// lowercase hex. The next op on the asset names it in prior_provenance_hash.
func ManifestHash(manifestCBOR []byte) string {
	sum := sha256.Sum256(manifestCBOR)
	return hex.EncodeToString(sum[:])
}

func (m *Manifest) validate() error {
	bad := func(field string) error { return malformed("manifest %s invalid", field) }
	switch {
	case !isDate(m.ProtocolVersion):
		return bad("protocol_version")
	case !canonicalUUID(m.AlbumID):
		return bad("album_id")
	case !canonicalUUID(m.FileID):
		return bad("file_id")
	case !isHash(m.CiphertextHash):
		return bad("ciphertext_hash")
	case m.PlaintextSize < 0:
		return bad("plaintext_size")
	case m.KeyMode != "derived" && m.KeyMode != "wrapped",
		(m.KeyMode == "wrapped") != (m.AssetKey != nil):
		return bad("key_mode or asset_key")
	case m.AssetKey != nil && len(m.AssetKey) != wrappedKeySize, len(m.AlbumKey) != wrappedKeySize:
		return bad("album_key or asset_key")
	case m.MetadataBlobHash != "" && !isHash(m.MetadataBlobHash):
		return bad("metadata_blob_hash")
	case m.OriginalBlobHash != "" && !isHash(m.OriginalBlobHash):
		return bad("original_blob_hash")
	case m.CreatedByUser == "":
		return bad("created_by_user")
	case !canonicalUUID(m.CreatedByDevice):
		return bad("created_by_device")
	case len(m.ClientVersion) < 1 || len(m.ClientVersion) > 128:
		return bad("client_version")
	case !isRFC3339(m.Timestamp):
		return bad("timestamp")
	case m.RetentionUntil != "" && !isRFC3339(m.RetentionUntil):
		return bad("retention_until")
	case m.Action != "create" && m.Action != "replace":
		return bad("action")
	case (m.Action == "replace") != (m.PriorProvenanceHash != ""),
		m.PriorProvenanceHash != "" && !isHash(m.PriorProvenanceHash):
		return bad("prior_provenance_hash")
	case m.Action == "replace" && m.OriginalBlobHash == "":
		return bad("original_blob_hash")
	}
	return nil
}

func isDate(s string) bool {
	_, err := time.Parse("2006-01-02", s)
	return err == nil && len(s) == 10
}

func isRFC3339(s string) bool {
	_, err := time.Parse(time.RFC3339Nano, s)
	return err == nil
}

// Envelope is the ManifestEnvelope of an op (server/PROTOCOL.md §9): the
// server-visible projection of a manifest, as JSON.
type Envelope struct {
	CryptoSuiteID       int64   `json:"crypto_suite_id"`
	ProtocolVersion     string  `json:"protocol_version"`
	AlbumID             string  `json:"album_id"`
	FileID              string  `json:"file_id"`
	AMKVersion          uint64  `json:"amk_version"`
	CiphertextHash      string  `json:"ciphertext_hash"`
	PlaintextSize       int64   `json:"plaintext_size"`
	ChunkSize           int64   `json:"chunk_size"`
	KeyMode             string  `json:"key_mode"`
	MetadataBlobHash    *string `json:"metadata_blob_hash,omitempty"`
	OriginalBlobHash    *string `json:"original_blob_hash,omitempty"`
	CreatedByUser       string  `json:"created_by_user"`
	CreatedByDevice     string  `json:"created_by_device"`
	ClientVersion       string  `json:"client_version"`
	Timestamp           string  `json:"timestamp"`
	Action              string  `json:"action"`
	PriorProvenanceHash *string `json:"prior_provenance_hash,omitempty"`
	RetentionUntil      *string `json:"retention_until,omitempty"`
}

// Envelope returns the manifest's envelope, every field copied from it.
func (m *Manifest) Envelope() Envelope {
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	return Envelope{
		CryptoSuiteID: CryptoSuiteID, ProtocolVersion: m.ProtocolVersion, AlbumID: m.AlbumID,
		FileID: m.FileID, AMKVersion: m.AMKVersion, CiphertextHash: m.CiphertextHash,
		PlaintextSize: m.PlaintextSize, ChunkSize: ChunkSize, KeyMode: m.KeyMode,
		MetadataBlobHash: opt(m.MetadataBlobHash), OriginalBlobHash: opt(m.OriginalBlobHash),
		CreatedByUser: m.CreatedByUser, CreatedByDevice: m.CreatedByDevice,
		ClientVersion: m.ClientVersion, Timestamp: m.Timestamp, Action: m.Action,
		PriorProvenanceHash: opt(m.PriorProvenanceHash), RetentionUntil: opt(m.RetentionUntil),
	}
}
