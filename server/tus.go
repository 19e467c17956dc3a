package server

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"

	"github.com/julienschmidt/httprouter"

	"sealbox/blobs"
	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/server/transfer"
)

// Resumable uploads speak tus 1.0.0 (core, creation, termination) inside an
// upload session (server/PROTOCOL.md §15), implemented here rather than through tusd:
// bearer auth, the session's ownership and expiry, the problem+json errors,
// the saved hash state and the durability order (fsync, then record, then
// answer) are all ours, and they are most of the code.
func (s *Server) registerTusRoutes() {
	s.handle(http.MethodOptions, "/v1/uploads/:upload_id/tus", s.tus(s.bearer(s.handleTusOptions)))
	s.handle(http.MethodPost, "/v1/uploads/:upload_id/tus", s.tus(s.bearer(s.handleTusCreate)))
	s.handle(http.MethodHead, "/v1/uploads/:upload_id/tus/:transfer_id", s.tus(s.bearer(s.handleTusHead)))
	s.handle(http.MethodPatch, "/v1/uploads/:upload_id/tus/:transfer_id", s.tus(s.bearer(s.handleTusPatch)))
	s.handle(http.MethodDelete, "/v1/uploads/:upload_id/tus/:transfer_id", s.tus(s.bearer(s.handleTusDelete)))
}

const (
	tusVersion    = "1.0.0"
	tusExtensions = "creation,termination"
	mediaTusPatch = "application/offset+octet-stream"
)

// tus wraps every tus handler. Every answer names the protocol version, and
// every request but OPTIONS must speak 1.0.0 (tus 1.0.0 "Tus-Resumable"):
// anything else is refused with 412 and the versions the server speaks,
// before anything else is looked at.
func (s *Server) tus(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		w.Header().Set("Tus-Resumable", tusVersion)
		w.Header().Set("Cache-Control", "no-store")
		if r.Method != http.MethodOptions && r.Header.Get("Tus-Resumable") != tusVersion {
			w.Header().Set("Tus-Version", tusVersion)
			return fault.Errorf(fault.ECodeTusVersion, "this server speaks tus %s; send Tus-Resumable: %s", tusVersion, tusVersion)
		}
		return h(w, r, ps)
	}
}

// handles "OPTIONS /v1/uploads/:upload_id/tus": what the server supports.
func (s *Server) handleTusOptions(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	sess := caller(r)
	uploadID, err := pathParam(ps, "upload_id", isUploadID)
	if err != nil {
		return err
	}
	if _, err := s.store.Upload(sess.AccountID, uploadID); err != nil {
		return err
	}
	h := w.Header()
	h.Set("Tus-Version", tusVersion)
	h.Set("Tus-Extension", tusExtensions)
	h.Set("Tus-Max-Size", strconv.FormatInt(s.cfg.MaxBlob, 10))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// handles "POST /v1/uploads/:upload_id/tus": creates a transfer of
// Upload-Length bytes that must hash to the content address in
// Upload-Metadata's "hash". Size and quota are checked here, before the
// client sends a byte. The body, if any, is ignored (creation-with-upload is
// not offered).
func (s *Server) handleTusCreate(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	sess := caller(r)
	uploadID, err := pathParam(ps, "upload_id", isUploadID)
	if err != nil {
		return err
	}
	length, err := headerOffset(r, "Upload-Length")
	if err != nil {
		return err
	}
	if length > s.cfg.MaxBlob {
		return fault.Errorf(fault.ECodeTooLarge, "the upload is larger than the largest blob")
	}
	hash, err := declaredHash(r)
	if err != nil {
		return err
	}
	id := s.newUUID()
	if err := s.transfers.Create(sess.AccountID, uploadID, &kv.Transfer{ID: id, Hash: hash, Length: length},
		kv.TransferLimits{MaxOpen: s.cfg.MaxTransfers, MaxPendingBytes: s.cfg.MaxPendingBytes}); err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/uploads/"+uploadID+"/tus/"+id)
	w.WriteHeader(http.StatusCreated)
	return nil
}

// handles "HEAD /v1/uploads/:upload_id/tus/:transfer_id": the acknowledged
// offset, from which the client resumes, and the Upload-Metadata of the
// creation (tus creation extension). Only the hash pair is kept, so only it is
// repeated: other pairs, a file name say, are plaintext the server does not
// keep. declaredHash accepts only padded standard base64, so re-encoding the
// stored hash gives back the exact pair the client sent.
func (s *Server) handleTusHead(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	sess := caller(r)
	uploadID, transferID, err := tusParams(ps)
	if err != nil {
		return err
	}
	t, err := s.transfers.Resumable(sess.AccountID, uploadID, transferID)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Upload-Offset", strconv.FormatInt(t.Offset, 10))
	h.Set("Upload-Length", strconv.FormatInt(t.Length, 10))
	h.Set("Upload-Metadata", "hash "+base64.StdEncoding.EncodeToString([]byte(t.Hash)))
	w.WriteHeader(http.StatusOK)
	return nil
}

// handles "PATCH /v1/uploads/:upload_id/tus/:transfer_id": appends the body
// at Upload-Offset, which must be the acknowledged offset (409 otherwise). It
// answers the new offset once the bytes are durable. With the last byte the
// blob is checked against its declared hash and stored as a PUT stores it, or
// the transfer is discarded (422). A body that would pass the declared length
// is 413, like any body over its limit.
func (s *Server) handleTusPatch(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	sess := caller(r)
	uploadID, transferID, err := tusParams(ps)
	if err != nil {
		return err
	}
	if err := requireMediaType(r, mediaTusPatch); err != nil {
		return err
	}
	offset, err := headerOffset(r, "Upload-Offset")
	if err != nil {
		return err
	}
	// Ownership before the lease: another account must get the 404 an
	// unknown id gets, not a 423 telling it the id is being written.
	owned, err := s.store.Transfer(sess.AccountID, uploadID, transferID)
	if err != nil {
		return err
	}
	// What the Append below holds for the bytes the transfer has left. Its
	// offset only moves forward, and the part under way with the bytes
	// left after it only shrink as it does: however the transfer moved
	// meanwhile, the Append holds no more than this.
	left := owned.Length - owned.Offset
	release, err := s.uploadBuffers.reserve(sess.AccountID, transfer.AppendBuffer(left)+s.partialBuffer(owned.Offset, left))
	if err != nil {
		return err
	}
	defer release()
	claim, err := s.transfers.Claim(transferID, s.claimID())
	if err != nil {
		return err
	}
	defer claim.Release()
	t, err := s.transfers.Resumable(sess.AccountID, uploadID, transferID)
	if err != nil {
		return err
	}
	if offset != t.Offset {
		return fault.Errorf(fault.ECodeOffsetMismatch, "the transfer is at offset %d, not %d", t.Offset, offset)
	}
	if r.ContentLength > t.Length-t.Offset {
		return fault.Errorf(fault.ECodeTooLarge, "the body passes the upload's length")
	}
	newOffset, err := claim.Append(s.bodyReader(w, r), sess.AccountID, uploadID, t)
	if err != nil {
		return err
	}
	w.Header().Set("Upload-Offset", strconv.FormatInt(newOffset, 10))
	return noContent(w)
}

// handles "DELETE /v1/uploads/:upload_id/tus/:transfer_id": discards the
// transfer and its bytes (tus termination).
func (s *Server) handleTusDelete(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	sess := caller(r)
	uploadID, transferID, err := tusParams(ps)
	if err != nil {
		return err
	}
	// Ownership before the lease, as for PATCH.
	if _, err := s.store.Transfer(sess.AccountID, uploadID, transferID); err != nil {
		return err
	}
	claim, err := s.transfers.Claim(transferID, s.claimID())
	if err != nil {
		return err
	}
	defer claim.Release()
	if err := claim.Discard(sess.AccountID, uploadID, transferID); err != nil {
		return err
	}
	return noContent(w)
}

func tusParams(ps httprouter.Params) (uploadID, transferID string, err error) {
	if uploadID, err = pathParam(ps, "upload_id", isUploadID); err != nil {
		return "", "", err
	}
	transferID, err = pathParam(ps, "transfer_id", isCanonicalUUID)
	return uploadID, transferID, err
}

// headerOffset parses a tus size or offset header: a non-negative decimal
// integer (400 when absent or anything else).
func headerOffset(r *http.Request, name string) (int64, error) {
	v := r.Header.Get(name)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || strings.TrimLeft(v, "0123456789") != "" {
		return 0, fault.FieldErrorf(fault.ECodeMalformed, name, "%s must be a non-negative integer", name)
	}
	return n, nil
}

// declaredHash reads the content address from Upload-Metadata ("key
// base64value" pairs separated by commas). Other keys are ignored: a file
// name, say, is not the server's to keep. A header that does not parse is
// 400; a missing hash or one that is not 64 lowercase hex characters, 422.
func declaredHash(r *http.Request) (string, error) {
	for pair := range strings.SplitSeq(r.Header.Get("Upload-Metadata"), ",") {
		key, value, _ := strings.Cut(strings.TrimSpace(pair), " ")
		if key != "hash" {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(value)
		if err != nil {
			return "", fault.FieldErrorf(fault.ECodeMalformed, "hash", "the hash in Upload-Metadata must be base64")
		}
		if !blobs.ValidHash(string(raw)) {
			return "", invalid("hash", "the hash must be 64 lowercase hex characters")
		}
		return string(raw), nil
	}
	return "", invalid("hash", "Upload-Metadata must carry the blob's hash")
}
