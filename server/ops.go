package server

import (
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"

	"sealbox/blobs"
	"sealbox/kv"
)

func (s *Server) registerOpRoutes() {
	s.handle(http.MethodPost, "/v1/albums/:album_id/ops", s.bearer(s.handleOpApply))
}

// maxOpBody is the body limit of a lifecycle op (server/PROTOCOL.md §1): the manifest
// and the metadata blob travel inline, base64.
const maxOpBody = 32 << 20

// maxChunkSize bounds the plaintext chunk size of the stream encryption.
const maxChunkSize = 16 << 20

// opRequest is OpRequest. Pointers tell a missing or null field (422) from a
// present one.
type opRequest struct {
	ManifestEnvelope *manifestEnvelope `json:"manifest_envelope"`
	ManifestCBOR     *string           `json:"manifest_cbor"`
	MetadataBlob     *string           `json:"metadata_blob"`
}

// manifestEnvelope is the server-visible projection of the signed manifest.
// The strict decoder refuses unknown keys inside it too.
type manifestEnvelope struct {
	CryptoSuiteID       *int64    `json:"crypto_suite_id"`
	ProtocolVersion     *string   `json:"protocol_version"`
	AlbumID             *string   `json:"album_id"`
	FileID              *string   `json:"file_id"`
	AMKVersion          *int64    `json:"amk_version"`
	CiphertextHash      *string   `json:"ciphertext_hash"`
	PlaintextSize       *int64    `json:"plaintext_size"`
	ChunkSize           *int64    `json:"chunk_size"`
	KeyMode             *keyMode  `json:"key_mode"`
	MetadataBlobHash    *string   `json:"metadata_blob_hash"`
	OriginalBlobHash    *string   `json:"original_blob_hash"`
	CreatedByUser       *string   `json:"created_by_user"`
	CreatedByDevice     *string   `json:"created_by_device"`
	ClientVersion       *string   `json:"client_version"`
	Timestamp           *string   `json:"timestamp"`
	Action              *opAction `json:"action"`
	PriorProvenanceHash *string   `json:"prior_provenance_hash"`
	RetentionUntil      *string   `json:"retention_until"`
}

// opAction is the envelope's action: a value outside the set is malformed
// (400), not invalid (server/PROTOCOL.md §1).
type opAction string

func (a *opAction) UnmarshalJSON(b []byte) error {
	v, err := decodeEnum(b, "manifest_envelope.action", kv.OpCreate, kv.OpReplace)
	if err != nil {
		return err
	}
	*a = opAction(v)
	return nil
}

// keyMode is the envelope's key_mode, an enum like action.
type keyMode string

func (m *keyMode) UnmarshalJSON(b []byte) error {
	v, err := decodeEnum(b, "manifest_envelope.key_mode", "derived", "wrapped")
	if err != nil {
		return err
	}
	*m = keyMode(v)
	return nil
}

// opWrite is a validated op: the store's view of it and the bytes it stores.
type opWrite struct {
	op       kv.Op
	manifest []byte
	metadata []byte // nil when the op carries no metadata blob
}

// validate runs steps 1 to 3 of the battery (server/PROTOCOL.md §9) after the strict
// decode: required fields, base64, and the envelope's value rules.
func (req *opRequest) validate(pathAlbumID string) (*opWrite, error) {
	if err := required("manifest_envelope", req.ManifestEnvelope); err != nil {
		return nil, err
	}
	if err := required("manifest_cbor", req.ManifestCBOR); err != nil {
		return nil, err
	}
	w := &opWrite{}
	var err error
	if w.manifest, err = decodeBase64Field(*req.ManifestCBOR); err != nil || len(w.manifest) == 0 {
		return nil, invalid("manifest_cbor", "manifest_cbor must be non-empty standard base64")
	}
	if req.MetadataBlob != nil {
		if w.metadata, err = decodeBase64Field(*req.MetadataBlob); err != nil {
			return nil, invalid("metadata_blob", "metadata_blob must be standard base64")
		}
	}
	if err := req.ManifestEnvelope.validate(pathAlbumID); err != nil {
		return nil, err
	}
	e := req.ManifestEnvelope
	w.op = kv.Op{
		AlbumID:          pathAlbumID,
		Action:           string(*e.Action),
		ProtocolVersion:  *e.ProtocolVersion,
		CreatedByUser:    *e.CreatedByUser,
		PriorHash:        deref(e.PriorProvenanceHash),
		CiphertextHash:   *e.CiphertextHash,
		MetadataBlobHash: deref(e.MetadataBlobHash),
		OriginalBlobHash: deref(e.OriginalBlobHash),
		Manifest:         kv.Blob{Hash: blobs.AddressOf(w.manifest), Size: int64(len(w.manifest))},
	}
	// The asset id keys the chain: one spelling per asset.
	w.op.AssetID, _ = parseUUID(*e.FileID)
	if req.MetadataBlob != nil {
		w.op.Metadata = &kv.Blob{Hash: blobs.AddressOf(w.metadata), Size: int64(len(w.metadata))}
	}
	return w, nil
}

// validate applies the envelope's value rules (step 3): 422 naming the field.
// Enum values were refused by the decoder (400).
func (e *manifestEnvelope) validate(pathAlbumID string) error {
	const p = "manifest_envelope."
	if err := required(p+"album_id", e.AlbumID); err != nil {
		return err
	}
	if *e.AlbumID != pathAlbumID {
		return invalid(p+"album_id", "manifest_envelope.album_id must equal the album id in the path")
	}
	for _, f := range []struct {
		name    string
		missing bool
	}{
		{"crypto_suite_id", e.CryptoSuiteID == nil}, {"protocol_version", e.ProtocolVersion == nil},
		{"file_id", e.FileID == nil}, {"amk_version", e.AMKVersion == nil},
		{"ciphertext_hash", e.CiphertextHash == nil}, {"plaintext_size", e.PlaintextSize == nil},
		{"chunk_size", e.ChunkSize == nil}, {"key_mode", e.KeyMode == nil},
		{"created_by_user", e.CreatedByUser == nil}, {"created_by_device", e.CreatedByDevice == nil},
		{"client_version", e.ClientVersion == nil}, {"timestamp", e.Timestamp == nil},
		{"action", e.Action == nil},
	} {
		if f.missing {
			return invalid(p+f.name, "%s%s is required", p, f.name)
		}
	}
	if _, ok := parseUUID(*e.FileID); !ok {
		return invalid(p+"file_id", "file_id must be a UUID")
	}
	if _, ok := parseUUID(*e.CreatedByDevice); !ok {
		return invalid(p+"created_by_device", "created_by_device must be a UUID")
	}
	for _, h := range []struct {
		name  string
		value *string
	}{
		{"ciphertext_hash", e.CiphertextHash}, {"metadata_blob_hash", e.MetadataBlobHash},
		{"original_blob_hash", e.OriginalBlobHash}, {"prior_provenance_hash", e.PriorProvenanceHash},
	} {
		if h.value != nil && !blobs.ValidHash(*h.value) {
			return invalid(p+h.name, "%s must be 64 lowercase hex characters", h.name)
		}
	}
	switch {
	case *e.CryptoSuiteID < 1:
		return invalid(p+"crypto_suite_id", "crypto_suite_id must be at least 1")
	case *e.AMKVersion < 0:
		return invalid(p+"amk_version", "amk_version must not be negative")
	case *e.PlaintextSize < 0:
		return invalid(p+"plaintext_size", "plaintext_size must not be negative")
	case *e.ChunkSize < 1 || *e.ChunkSize > maxChunkSize:
		return invalid(p+"chunk_size", "chunk_size must be 1 to 16 MiB")
	case !isProtocolDate(*e.ProtocolVersion):
		return invalid(p+"protocol_version", "protocol_version must be a date YYYY-MM-DD")
	case !isRFC3339(*e.Timestamp):
		return invalid(p+"timestamp", "timestamp must be an RFC 3339 time")
	case e.RetentionUntil != nil && !isRFC3339(*e.RetentionUntil):
		return invalid(p+"retention_until", "retention_until must be an RFC 3339 time")
	}
	if n := utf8.RuneCountInString(*e.ClientVersion); n < 1 || n > 128 {
		return invalid(p+"client_version", "client_version must be 1 to 128 characters")
	}
	return nil
}

func isRFC3339(s string) bool {
	_, err := time.Parse(time.RFC3339, s)
	return err == nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

type opResponse struct {
	AssetID  string `json:"asset_id"`
	SyncSeq  uint64 `json:"sync_seq"`
	Action   string `json:"action"`
	Replayed bool   `json:"replayed"`
}

// handles "POST /v1/albums/:album_id/ops": applies one signed lifecycle
// manifest to an asset. Every step of the validation battery runs before
// anything is written. When a manifest or metadata blob is too large to stay
// inline, the store's steps run first in a read transaction (CheckOp) and
// then the blob goes to the blob store; either way one transaction runs the
// store's steps and applies the op (ApplyOp), with the inline blobs.
func (s *Server) handleOpApply(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	sess := caller(r)
	albumID, err := pathParam(ps, "album_id", isCanonicalUUID)
	if err != nil {
		return err
	}
	var req opRequest
	body, err := s.readBodyOwnLimit(w, r, mediaJSON, maxOpBody)
	if err != nil {
		return err
	}
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	wr, err := req.validate(albumID)
	if err != nil {
		return err
	}
	if err := s.checkSignedProtocol(wr.op.ProtocolVersion, "manifest_envelope.protocol_version", "manifest"); err != nil {
		return err
	}
	if files := s.inlineOpBlobs(wr); len(files) > 0 {
		// A blob file outlives a refused op, so the store's part of the
		// battery runs first and a refused op writes no file. The files
		// are content-addressed and written idempotently, so a retried or
		// concurrent op storing the same bytes is harmless. If the
		// transaction then refuses the op (another writer moved the chain
		// head first), the files it wrote stay on disk unreferenced by any
		// holding: gc collects unreferenced blobs after its grace period.
		// An op whose blobs all stay inline skips this read: ApplyOp runs
		// the same checks in its transaction and writes nothing when they
		// refuse.
		res, err := s.store.CheckOp(sess.AccountID, &wr.op)
		if err != nil {
			return err
		}
		if res != nil {
			return writeOpResult(w, res)
		}
		if err := s.content.PutFiles(files...); err != nil {
			return err
		}
	}
	res, err := s.store.ApplyOp(sess.AccountID, &wr.op)
	if err != nil {
		return err
	}
	return writeOpResult(w, res)
}

func writeOpResult(w http.ResponseWriter, res *kv.OpResult) error {
	return writeJSON(w, http.StatusOK, opResponse{AssetID: res.AssetID, SyncSeq: res.SyncSeq, Action: res.Action, Replayed: res.Replayed})
}

// inlineOpBlobs leaves the op's manifest and metadata blobs at or under the
// inline threshold to the store, to keep inline in the transaction that
// applies the op (Blob.Data), and returns the others, which must be durable
// files before that transaction. Each file alone would be a durable file
// creation (file and directory fsyncs) costing more than the whole store
// transaction; PutFiles shares that work with the ops of other requests
// writing at the same moment.
func (s *Server) inlineOpBlobs(wr *opWrite) (files [][]byte) {
	if wr.op.Manifest.Data = s.content.Inline(wr.manifest); wr.op.Manifest.Data == nil {
		files = append(files, wr.manifest)
	}
	if wr.metadata != nil {
		if wr.op.Metadata.Data = s.content.Inline(wr.metadata); wr.op.Metadata.Data == nil {
			files = append(files, wr.metadata)
		}
	}
	return files
}
