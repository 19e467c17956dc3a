package server

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/julienschmidt/httprouter"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/server/hybridsig"
)

func (s *Server) registerDirectoryRoutes() {
	s.handle(http.MethodPost, "/v1/auth/devices/directory", s.bearer(s.handleDirectoryPublish))
	s.handle(http.MethodGet, "/v1/auth/devices/directory/:user_id", s.bearer(s.handleDirectoryGet))
}

// maxDirectory is the directory size limit (server/PROTOCOL.md §1).
const maxDirectory = 256 << 10

// headerIdentityKey carries the account identity public key: the 1984-byte
// hybrid layout in padded standard base64.
const headerIdentityKey = "X-Service-Identity-Key"

// directoryLimits check untrusted directory bytes. The body limit already
// bounds the work; the limits here refuse what no directory needs (deep
// nesting). Duplicate keys are refused by topLevelMap, because a signed
// directory with two directory_version entries would mean one version to the
// server and possibly another to a client.
var directoryLimits = cborLimits{MaxNestedLevels: 32, MaxArrayElements: maxDirectory, MaxMapPairs: maxDirectory}

// maxDirectoryVersion is the largest directory_version accepted, 2^53-1:
// the largest integer a JavaScript client holds exactly. It also bounds what
// a stolen token can do: a publish of 2^64-1 would leave the owner no version
// above it, and every later publish 409.
const maxDirectoryVersion = 1<<53 - 1

// readDirectoryVersion returns the top-level directory_version of a
// directory: the body must be one well-formed CBOR data item whose top level
// is a map (see topLevelMap) holding the text key directory_version with an
// unsigned integer >= 1 (major type 0, untagged). Every other key, of any
// type, is skipped. Anything else is 400 error.directory.malformed; a
// version above maxDirectoryVersion is 422 error.request.invalid with field
// directory_version.
func readDirectoryVersion(body []byte) (uint64, error) {
	malformed := fault.Errorf(fault.ECodeDirectoryMalformed,
		"the directory must be one CBOR map holding the text key directory_version with an unsigned integer of at least 1")
	head, ok := topLevelMap(directoryLimits, body)
	if !ok {
		return 0, malformed
	}
	raw := head["directory_version"]
	if len(raw) == 0 || raw[0]>>5 != 0 {
		return 0, malformed
	}
	var v uint64
	if err := cbor.Unmarshal(raw, &v); err != nil || v == 0 {
		return 0, malformed
	}
	if v > maxDirectoryVersion {
		return 0, fault.FieldErrorf(fault.ECodeInvalid, "directory_version",
			"directory_version must be at most 2^53-1 (%d), the largest integer every client holds exactly", uint64(maxDirectoryVersion))
	}
	return v, nil
}

// identityKeyOf reads X-Service-Identity-Key: missing or not 1984 bytes of
// canonical padded standard base64 is 400.
func identityKeyOf(r *http.Request) (*hybridsig.PublicKey, error) {
	pk, err := hybridsig.DecodePublicKey(r.Header.Get(headerIdentityKey))
	if err != nil {
		return nil, fault.FieldErrorf(fault.ECodeMalformed, headerIdentityKey,
			"%s must be the 1984-byte identity public key in padded standard base64", headerIdentityKey)
	}
	return pk, nil
}

type publishDirectoryResponse struct {
	DirectoryVersion uint64 `json:"directory_version"`
}

// handles "POST /v1/auth/devices/directory": the bytes are stored verbatim;
// the version check and the write are one transaction.
func (s *Server) handleDirectoryPublish(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	sess := caller(r)
	pk, err := identityKeyOf(r)
	if err != nil {
		return err
	}
	body, err := s.readBody(w, r, mediaCBOR, maxDirectory)
	if err != nil {
		return err
	}
	version, err := readDirectoryVersion(body)
	if err != nil {
		return err
	}
	d := &kv.Directory{Version: version, Bytes: body, IdentityKey: pk.Bytes()}
	lim := kv.PublishLimit{Interval: time.Hour / time.Duration(s.cfg.DirectoryPublishes), Burst: s.cfg.DirectoryBurst}
	if err := s.store.PublishDirectory(sess.AccountID, d, lim); err != nil {
		return err
	}
	w.Header().Set(headerLogIndex, strconv.FormatInt(d.LogIndex, 10))
	return writeJSON(w, http.StatusOK, publishDirectoryResponse{DirectoryVersion: version})
}

// handles "GET /v1/auth/devices/directory/:user_id": the exact bytes the
// owner signed, with the pinned identity key beside them. Any account's
// directory is readable by any signed-in caller: it publishes keys and
// nothing else.
func (s *Server) handleDirectoryGet(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	userID, ok := parseUUID(ps.ByName("user_id"))
	if !ok {
		return fault.FieldErrorf(fault.ECodeMalformed, "user_id", "user_id must be a UUID")
	}
	d, err := s.store.Directory(userID)
	if err != nil {
		return err
	}
	w.Header().Set(headerIdentityKey, base64.StdEncoding.EncodeToString(d.IdentityKey))
	w.Header().Set(headerLogIndex, strconv.FormatInt(d.LogIndex, 10))
	return writeBytes(w, mediaCBOR, d.Bytes)
}
