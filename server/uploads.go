package server

import (
	"io"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"sealbox/blobs"
	"sealbox/kv"
	"sealbox/kv/fault"
)

func (s *Server) registerUploadRoutes() {
	s.handle(http.MethodPost, "/v1/albums/:album_id/uploads", s.bearer(s.handleUploadOpen))
	s.handle(http.MethodPut, "/v1/uploads/:upload_id/blobs/:hash", s.bearer(s.handleUploadBlob))
	s.handle(http.MethodDelete, "/v1/uploads/:upload_id", s.bearer(s.handleUploadClose))
}

// uploadIdle is how long an upload session lives after its last write
// (server/PROTOCOL.md §8).
const uploadIdle = time.Hour

type uploadResponse struct {
	UploadID  string `json:"upload_id"`
	ExpiresAt string `json:"expires_at"`
}

// handles "POST /v1/albums/:album_id/uploads": opens an upload session on
// one of the caller's albums. The body, if any, is ignored.
func (s *Server) handleUploadOpen(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	sess := caller(r)
	albumID, err := pathParam(ps, "album_id", isCanonicalUUID)
	if err != nil {
		return err
	}
	token := s.newToken(prefixUpload)
	up, err := s.store.OpenUpload(sess.AccountID, albumID, token, uploadIdle, s.cfg.MaxUploadSessions)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, uploadResponse{UploadID: token, ExpiresAt: formatTime(up.ExpiresAt)})
}

type blobResponse struct {
	Hash string `json:"hash"`
	Size int64  `json:"size"`
}

// handles "PUT /v1/uploads/:upload_id/blobs/:hash": streams the body into
// the blob store (constant memory, checked against the hash in the path),
// then records that the caller holds it. 201 when the caller did not hold the
// blob before, 200 when it did.
func (s *Server) handleUploadBlob(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	sess := caller(r)
	uploadID, err := pathParam(ps, "upload_id", isUploadID)
	if err != nil {
		return err
	}
	hash, err := pathParam(ps, "hash", blobs.ValidHash)
	if err != nil {
		return err
	}
	// Refuse an unknown session, or a declared size past the quota, before
	// reading a possibly huge body.
	room, err := s.store.UploadRoom(sess.AccountID, uploadID, hash)
	if err != nil {
		return err
	}
	if r.ContentLength > room {
		return quotaExceeded(room)
	}
	body, err := s.streamBody(w, r, mediaOctet, s.cfg.MaxBlob)
	if err != nil {
		return err
	}
	// The memory the body may take is reserved before a byte of it is read
	// (uploadbuffer.go).
	release, err := s.uploadBuffers.reserve(sess.AccountID, s.putBuffer(r.ContentLength))
	if err != nil {
		return err
	}
	defer release()
	// File I/O happens here, outside any transaction (a small blob is kept
	// inline by the store's transaction instead); the store records the
	// holding afterwards and re-checks that the session is still open and the
	// quota still holds. A body without Content-Length is cut off at the room
	// left, so a refusal leaves no file (Put keeps nothing when its reader
	// fails). A concurrent upload by the same account can still take the room
	// between the two looks; the file that rare race leaves is held by no one,
	// and gc collects it.
	b, err := s.content.Put(&quotaReader{r: body, room: room}, hash, r.ContentLength, s.putLimit(r.ContentLength))
	if err != nil {
		return err
	}
	newlyHeld, err := s.store.AddUploadBlob(sess.AccountID, uploadID, b, uploadIdle)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if newlyHeld {
		status = http.StatusCreated
	}
	return writeJSON(w, status, blobResponse{Hash: b.Hash, Size: b.Size})
}

// quotaReader passes at most room bytes of r and fails with
// error.quota.exceeded at the next one.
type quotaReader struct {
	r    io.Reader
	room int64
}

func (q *quotaReader) Read(p []byte) (int, error) {
	if int64(len(p)) > q.room {
		p = p[:q.room+1] // one byte more tells "past the quota" from "exactly at it"
	}
	n, err := q.r.Read(p)
	if int64(n) > q.room {
		return 0, quotaExceeded(q.room)
	}
	q.room -= int64(n)
	return n, err
}

func quotaExceeded(room int64) error {
	return fault.LimitErrorf(fault.ECodeQuotaExceeded, kv.LimitQuota, 0, "the blob would take the account past its quota (room for %d more bytes); nothing was stored", room)
}

// handles "DELETE /v1/uploads/:upload_id": closes the session; the blobs it
// stored stay held by the caller, its unfinished transfers are discarded.
func (s *Server) handleUploadClose(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	sess := caller(r)
	uploadID, err := pathParam(ps, "upload_id", isUploadID)
	if err != nil {
		return err
	}
	if err := s.store.CloseUpload(sess.AccountID, uploadID); err != nil {
		return err
	}
	s.transfers.RemovePartials() // of the transfers the session still had open
	return noContent(w)
}
