package server

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"sealbox/kv"
	"sealbox/kv/fault"
)

// opSeed is a well-formed OpRequest: the fuzzer mutates it into everything
// around it.
const opSeed = `{"manifest_envelope":{"crypto_suite_id":1,"protocol_version":"2026-01-01",` +
	`"album_id":"0f0e0d0c-0b0a-4908-8706-050403020100","file_id":"a55e7000-0000-4000-8000-000000000001",` +
	`"amk_version":0,"ciphertext_hash":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",` +
	`"plaintext_size":1234,"chunk_size":65536,"key_mode":"derived",` +
	`"created_by_user":"u","created_by_device":"7d1c2b9e-3d4a-4e5f-8a7b-1c2d3e4f5a6b",` +
	`"client_version":"c/1","timestamp":"2026-11-22T10:00:00Z","action":"create"},` +
	`"manifest_cbor":"oWFuYQ==","metadata_blob":null}`

// FuzzOpRequest: the strict decoder and the envelope's rules never panic; a
// refusal by the decoder is 400 error.request.malformed and by validate 422
// error.request.invalid; an accepted op has a non-empty manifest whose hash
// is the op's manifest hash, a canonical asset id and an action of the set.
func FuzzOpRequest(f *testing.F) {
	for _, seed := range []string{
		opSeed, `{}`, `[]`, `{"manifest_envelope":{}}`, `{"manifest_envelope":{"action":"delete"}}`,
		`{"manifest_envelope":{"key_mode":7}}`, `{"manifest_envelope":null,"manifest_cbor":"AA=="}`,
		`{"manifest_envelope":{"unknown":1}}`, `{"manifest_cbor":"@@"}`, opSeed + `{}`,
	} {
		f.Add([]byte(seed))
	}
	const album = "0f0e0d0c-0b0a-4908-8706-050403020100"
	f.Fuzz(func(t *testing.T, body []byte) {
		var req opRequest
		if err := decodeStrict(body, &req); err != nil {
			if code := fault.ErrorCode(err); code != fault.ECodeMalformed {
				t.Fatalf("decode refusal with code %q (%v)", code, err)
			}
			return
		}
		w, err := req.validate(album)
		if err != nil {
			if code := fault.ErrorCode(err); code != fault.ECodeInvalid {
				t.Fatalf("validate refusal with code %q (%v)", code, err)
			}
			return
		}
		sum := sha256.Sum256(w.manifest)
		if len(w.manifest) == 0 || w.op.Manifest.Hash != hex.EncodeToString(sum[:]) || w.op.Manifest.Size != int64(len(w.manifest)) {
			t.Fatalf("manifest %q described as %+v", w.manifest, w.op.Manifest)
		}
		if !isCanonicalUUID(w.op.AssetID) || w.op.AlbumID != album {
			t.Fatalf("asset %q album %q", w.op.AssetID, w.op.AlbumID)
		}
		if w.op.Action != kv.OpCreate && w.op.Action != kv.OpReplace {
			t.Fatalf("action %q", w.op.Action)
		}
		if (w.metadata == nil) != (w.op.Metadata == nil) {
			t.Fatalf("metadata bytes and description disagree")
		}
	})
}
