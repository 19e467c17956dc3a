package server

import (
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"

	"sealbox/blobs"
	"sealbox/kv"
)

func (s *Server) registerTrashRoutes() {
	s.handle(http.MethodPost, "/v1/albums/:album_id/tombstones", s.bearer(s.handleTombstone))
	s.handle(http.MethodPost, "/v1/albums/:album_id/assets/:asset_id/restore", s.bearer(s.handleAssetRestore))
	s.handle(http.MethodDelete, "/v1/albums/:album_id", s.bearer(s.handleAlbumDelete))
	s.handle(http.MethodPost, "/v1/albums/:album_id/restore", s.bearer(s.handleAlbumRestore))
}

// maxTombstoneBody bounds a tombstone request: a signed CBOR map of a few
// KiB (the signature and signer key are most of it), in base64, with its
// envelope.
const maxTombstoneBody = 256 << 10

// tombstoneRequest is TombstoneRequest: the signed tombstone and the
// server-visible projection of it, as an op's manifest and envelope.
type tombstoneRequest struct {
	TombstoneEnvelope *tombstoneEnvelope `json:"tombstone_envelope"`
	TombstoneCBOR     *string            `json:"tombstone_cbor"`
}

type tombstoneEnvelope struct {
	CryptoSuiteID       *int64  `json:"crypto_suite_id"`
	ProtocolVersion     *string `json:"protocol_version"`
	AlbumID             *string `json:"album_id"`
	FileID              *string `json:"file_id"`
	CreatedByUser       *string `json:"created_by_user"`
	CreatedByDevice     *string `json:"created_by_device"`
	ClientVersion       *string `json:"client_version"`
	Timestamp           *string `json:"timestamp"`
	PriorProvenanceHash *string `json:"prior_provenance_hash"`
}

// validate runs steps 1 to 3 of the battery for a tombstone
// (server/PROTOCOL.md §9): required fields, base64, the envelope's rules.
func (req *tombstoneRequest) validate(pathAlbumID string) (*kv.Tombstone, []byte, error) {
	if err := required("tombstone_envelope", req.TombstoneEnvelope); err != nil {
		return nil, nil, err
	}
	if err := required("tombstone_cbor", req.TombstoneCBOR); err != nil {
		return nil, nil, err
	}
	raw, err := decodeBase64Field(*req.TombstoneCBOR)
	if err != nil || len(raw) == 0 {
		return nil, nil, invalid("tombstone_cbor", "tombstone_cbor must be non-empty standard base64")
	}
	const p = "tombstone_envelope."
	e := req.TombstoneEnvelope
	if err := required(p+"album_id", e.AlbumID); err != nil {
		return nil, nil, err
	}
	if *e.AlbumID != pathAlbumID {
		return nil, nil, invalid(p+"album_id", "tombstone_envelope.album_id must equal the album id in the path")
	}
	for _, f := range []struct {
		name    string
		missing bool
	}{
		{"crypto_suite_id", e.CryptoSuiteID == nil}, {"protocol_version", e.ProtocolVersion == nil},
		{"file_id", e.FileID == nil}, {"created_by_user", e.CreatedByUser == nil},
		{"created_by_device", e.CreatedByDevice == nil}, {"client_version", e.ClientVersion == nil},
		{"timestamp", e.Timestamp == nil}, {"prior_provenance_hash", e.PriorProvenanceHash == nil},
	} {
		if f.missing {
			return nil, nil, invalid(p+f.name, "%s%s is required", p, f.name)
		}
	}
	assetID, ok := parseUUID(*e.FileID)
	switch {
	case !ok:
		return nil, nil, invalid(p+"file_id", "file_id must be a UUID")
	case !isUUID(*e.CreatedByDevice):
		return nil, nil, invalid(p+"created_by_device", "created_by_device must be a UUID")
	case !blobs.ValidHash(*e.PriorProvenanceHash):
		return nil, nil, invalid(p+"prior_provenance_hash", "prior_provenance_hash must be 64 lowercase hex characters")
	case *e.CryptoSuiteID < 1:
		return nil, nil, invalid(p+"crypto_suite_id", "crypto_suite_id must be at least 1")
	case !isProtocolDate(*e.ProtocolVersion):
		return nil, nil, invalid(p+"protocol_version", "protocol_version must be a date YYYY-MM-DD")
	case !isRFC3339(*e.Timestamp):
		return nil, nil, invalid(p+"timestamp", "timestamp must be an RFC 3339 time")
	}
	if n := utf8.RuneCountInString(*e.ClientVersion); n < 1 || n > 128 {
		return nil, nil, invalid(p+"client_version", "client_version must be 1 to 128 characters")
	}
	return &kv.Tombstone{
		AlbumID: pathAlbumID, AssetID: assetID, ProtocolVersion: *e.ProtocolVersion, CreatedByUser: *e.CreatedByUser,
		PriorHash: *e.PriorProvenanceHash, Manifest: kv.Blob{Hash: blobs.AddressOf(raw), Size: int64(len(raw))},
	}, raw, nil
}

// isUUID reports whether v is a UUID in any case.
func isUUID(v string) bool {
	_, ok := parseUUID(v)
	return ok
}

// handles "POST /v1/albums/:album_id/tombstones": deletes one photo with a
// signed tombstone, the end of its chain, and puts it in the trash for
// --trash (server/PROTOCOL.md §9). The battery is an op's, without the
// blob checks; a tombstone too large to stay inline is checked, then
// written as a file, then applied, as an op's manifest.
func (s *Server) handleTombstone(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	sess := caller(r)
	albumID, err := pathParam(ps, "album_id", isCanonicalUUID)
	if err != nil {
		return err
	}
	body, err := s.readBody(w, r, mediaJSON, maxTombstoneBody)
	if err != nil {
		return err
	}
	var req tombstoneRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	t, raw, err := req.validate(albumID)
	if err != nil {
		return err
	}
	if err := s.checkSignedProtocol(t.ProtocolVersion, "tombstone_envelope.protocol_version", "tombstone"); err != nil {
		return err
	}
	if t.Manifest.Data = s.content.Inline(raw); t.Manifest.Data == nil {
		res, err := s.store.CheckTombstone(sess.AccountID, t)
		if err != nil {
			return err
		}
		if res != nil {
			return writeOpResult(w, res)
		}
		if err := s.content.PutFiles(raw); err != nil {
			return err
		}
	}
	res, err := s.store.ApplyTombstone(sess.AccountID, t, kv.Deadline(s.now(), s.cfg.Trash))
	if err != nil {
		return err
	}
	return writeOpResult(w, res)
}

// handles "POST /v1/albums/:album_id/assets/:asset_id/restore": takes the
// caller's deleted photo out of the trash before its purge.
func (s *Server) handleAssetRestore(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	sess := caller(r)
	albumID, err := pathParam(ps, "album_id", isCanonicalUUID)
	if err != nil {
		return err
	}
	assetID, err := pathParam(ps, "asset_id", isUUID)
	if err != nil {
		return err
	}
	// The asset id keys the chain in lowercase, as file_id does.
	assetID, _ = parseUUID(assetID)
	res, err := s.store.RestoreAsset(sess.AccountID, albumID, assetID)
	if err != nil {
		return err
	}
	return writeOpResult(w, res)
}

// albumTombstoneRequest is AlbumTombstoneRequest: a photo's tombstone
// without file_id and prior_provenance_hash, for the whole album.
type albumTombstoneRequest struct {
	TombstoneEnvelope *albumTombstoneEnvelope `json:"tombstone_envelope"`
	TombstoneCBOR     *string                 `json:"tombstone_cbor"`
}

type albumTombstoneEnvelope struct {
	CryptoSuiteID   *int64  `json:"crypto_suite_id"`
	ProtocolVersion *string `json:"protocol_version"`
	AlbumID         *string `json:"album_id"`
	CreatedByUser   *string `json:"created_by_user"`
	CreatedByDevice *string `json:"created_by_device"`
	ClientVersion   *string `json:"client_version"`
	Timestamp       *string `json:"timestamp"`
}

// validate checks an album's tombstone as a photo's is checked, the two
// members it lacks given: the path's album and a placeholder chain.
func (req *albumTombstoneRequest) validate(pathAlbumID string) (*kv.AlbumTombstone, []byte, error) {
	photo := tombstoneRequest{TombstoneCBOR: req.TombstoneCBOR}
	if e := req.TombstoneEnvelope; e != nil {
		fileID, prior := pathAlbumID, strings.Repeat("0", 64)
		photo.TombstoneEnvelope = &tombstoneEnvelope{
			CryptoSuiteID: e.CryptoSuiteID, ProtocolVersion: e.ProtocolVersion, AlbumID: e.AlbumID, FileID: &fileID,
			CreatedByUser: e.CreatedByUser, CreatedByDevice: e.CreatedByDevice, ClientVersion: e.ClientVersion,
			Timestamp: e.Timestamp, PriorProvenanceHash: &prior,
		}
	}
	t, raw, err := photo.validate(pathAlbumID)
	if err != nil {
		return nil, nil, err
	}
	return &kv.AlbumTombstone{AlbumID: pathAlbumID, ProtocolVersion: t.ProtocolVersion, CreatedByUser: t.CreatedByUser, Manifest: t.Manifest}, raw, nil
}

type albumTrashResponse struct {
	AlbumID  string `json:"album_id"`
	SyncSeq  uint64 `json:"sync_seq"`
	Assets   int    `json:"assets"`
	Replayed bool   `json:"replayed"`
}

// handles "DELETE /v1/albums/:album_id": deletes the album with a signed
// tombstone: every live photo of it in one act, into the trash for --trash
// (server/PROTOCOL.md §9). Its id stays taken.
func (s *Server) handleAlbumDelete(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	sess := caller(r)
	albumID, err := pathParam(ps, "album_id", isCanonicalUUID)
	if err != nil {
		return err
	}
	body, err := s.readBody(w, r, mediaJSON, maxTombstoneBody)
	if err != nil {
		return err
	}
	var req albumTombstoneRequest
	if err := decodeStrict(body, &req); err != nil {
		return err
	}
	t, raw, err := req.validate(albumID)
	if err != nil {
		return err
	}
	if err := s.checkSignedProtocol(t.ProtocolVersion, "tombstone_envelope.protocol_version", "tombstone"); err != nil {
		return err
	}
	if t.Manifest.Data = s.content.Inline(raw); t.Manifest.Data == nil {
		if err := s.content.PutFiles(raw); err != nil {
			// A refused deletion leaves the file unheld, for gc, as a
			// refused op's manifest.
			return err
		}
	}
	res, err := s.store.DeleteAlbum(sess.AccountID, t, kv.Deadline(s.now(), s.cfg.Trash))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, albumTrashResponse{AlbumID: albumID, SyncSeq: res.SyncSeq, Assets: res.Assets, Replayed: res.Replayed})
}

// handles "POST /v1/albums/:album_id/restore": takes the caller's deleted
// album, with the photos its deletion deleted, out of the trash.
func (s *Server) handleAlbumRestore(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	sess := caller(r)
	albumID, err := pathParam(ps, "album_id", isCanonicalUUID)
	if err != nil {
		return err
	}
	res, err := s.store.RestoreAlbum(sess.AccountID, albumID)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, albumTrashResponse{AlbumID: albumID, SyncSeq: res.SyncSeq, Assets: res.Assets})
}
