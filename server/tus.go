package server

import (
	"encoding"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/julienschmidt/httprouter"

	"sealbox/blobs"
	"sealbox/kv"
	"sealbox/kv/fault"
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

	// tusCheckpoint bounds the bytes a PATCH takes between two
	// acknowledgements (fsync, then record), so a crash in the middle of a
	// long PATCH loses at most this much.
	tusCheckpoint = 64 << 20
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
	if length == 0 {
		// A tus client considers an empty upload done once it is created
		// and sends no PATCH, so it is stored now, as an empty PUT is.
		if err := s.storeEmpty(sess.AccountID, uploadID, hash); err != nil {
			return err
		}
	} else if err := s.store.CreateTransfer(sess.AccountID, uploadID, &kv.Transfer{ID: id, Hash: hash, Length: length}, uploadIdle,
		kv.TransferLimits{MaxOpen: s.cfg.MaxTransfers, MaxPendingBytes: s.cfg.MaxPendingBytes}); err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/uploads/"+uploadID+"/tus/"+id)
	w.WriteHeader(http.StatusCreated)
	return nil
}

// storeEmpty stores the empty blob for the session, refusing a declared hash
// that is not the empty one.
func (s *Server) storeEmpty(accountID, uploadID, hash string) error {
	if _, err := s.store.Upload(accountID, uploadID); err != nil {
		return err
	}
	if hash != blobs.AddressOf(nil) {
		return fault.FieldErrorf(fault.ECodeHashMismatch, "hash", "an empty upload does not hash to the declared hash; nothing was stored")
	}
	info, _, err := s.blobs.Put(strings.NewReader(""), hash, 0)
	if err != nil {
		return err
	}
	_, err = s.store.AddUploadBlob(accountID, uploadID, kv.Blob{Hash: info.Hash, Size: info.Size}, uploadIdle)
	return err
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
	t, err := s.transfer(sess.AccountID, uploadID, transferID)
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
	claim, err := s.claimTransfer(transferID)
	if err != nil {
		return err
	}
	defer claim.release()
	t, err := s.transfer(sess.AccountID, uploadID, transferID)
	if err != nil {
		return err
	}
	if offset != t.Offset {
		return fault.Errorf(fault.ECodeOffsetMismatch, "the transfer is at offset %d, not %d", t.Offset, offset)
	}
	if r.ContentLength > t.Length-t.Offset {
		return fault.Errorf(fault.ECodeTooLarge, "the body passes the upload's length")
	}
	newOffset, err := s.appendBody(claim.guard(s.bodyReader(w, r)), claim, sess.AccountID, uploadID, t)
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
	claim, err := s.claimTransfer(transferID)
	if err != nil {
		return err
	}
	defer claim.release()
	if err := s.store.DiscardTransfer(sess.AccountID, uploadID, transferID); err != nil {
		return err
	}
	s.removePartials()
	return noContent(w)
}

// transfer returns the caller's transfer if it can resume. The store can
// outlive a partial file: a backup restores the database but not partial
// files, or the disk lost them. A transfer whose file holds fewer bytes than
// it acknowledged is then discarded and answered as not found, so the tus
// client starts a new upload instead of failing at every resume.
//
// Without the transfer's lease (HEAD) this cannot discard a healthy transfer:
// a partial file never shrinks below an offset once recorded, a completed
// one counts as its blob (whole, so past every offset), and discard and
// expiry delete the record before the file, so a file found missing under a
// stale record finds the record gone too.
func (s *Server) transfer(accountID, uploadID, id string) (*kv.Transfer, error) {
	t, err := s.store.Transfer(accountID, uploadID, id)
	if err != nil {
		return nil, err
	}
	// A transfer at offset 0 may have no bytes yet: its size is then 0.
	size, err := s.blobs.PartialSize(id, t.Hash)
	if err != nil {
		return nil, err
	}
	if size >= t.Offset {
		return t, nil
	}
	s.log.Warn().Str("transfer", id).Int64("offset", t.Offset).Int64("partial_bytes", size).
		Msg("a transfer's partial file lost acknowledged bytes; the transfer is discarded")
	if err := s.store.DiscardTransfer(accountID, uploadID, id); err != nil {
		return nil, err
	}
	s.removePartials()
	return nil, fault.Errorf(fault.ECodeTransferNotFound, "the transfer's received bytes were lost; start a new upload")
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

// transferClaim is one request's lease on a transfer (see claimTransfer).
type transferClaim struct {
	s      *Server
	name   string
	holder string
	// lost is set when a renewal found the lease another's: this request
	// reads and acknowledges nothing more.
	lost atomic.Bool
	stop chan struct{}
	done chan struct{}
}

// errClaimLost ends a PATCH whose transfer lease could not be renewed. It is
// not a *fault.Error, so appendBody acknowledges nothing after it; the
// handler answers it as error.transfer.locked.
var errClaimLost = errors.New("the transfer's lease was lost")

// claimTransfer claims the transfer for one writing request with a lease
// in the store, so that one request writes it at a time on every node
// sharing the store. tus allows one writer per upload; a second, typically
// a client retrying while a server still reads its first request, is told
// to retry (423, which tus clients retry). A node killed mid-PATCH leaves
// the lease to lapse after TusLeaseTTL, and the client's retry then
// succeeds. While the request runs the lease is renewed every third of its
// ttl; release stops that and gives the lease up.
func (s *Server) claimTransfer(id string) (*transferClaim, error) {
	c := &transferClaim{s: s, name: "tus/" + id, holder: s.claimID(), stop: make(chan struct{}), done: make(chan struct{})}
	held, err := s.store.TryLease(c.name, c.holder, s.cfg.TusLeaseTTL)
	if err != nil {
		return nil, err
	}
	if !held {
		return nil, s.transferLocked(c.name, "another request is writing this transfer; retry")
	}
	go c.renew()
	return c, nil
}

func (c *transferClaim) renew() {
	defer close(c.done)
	t := time.NewTicker(max(c.s.cfg.TusLeaseTTL/3, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			held, err := c.s.store.TryLease(c.name, c.holder, c.s.cfg.TusLeaseTTL)
			if err != nil {
				// Tried again next tick; confirm checks the lease before
				// anything is acknowledged, so a lapse meanwhile is caught.
				c.s.log.Error().Err(err).Str("lease", c.name).Msg("renew a transfer's lease")
				continue
			}
			if !held {
				c.lost.Store(true)
				c.s.log.Warn().Str("lease", c.name).Msg("lost a transfer's lease mid-request; it stops")
				return
			}
		}
	}
}

// check refuses to go on once the lease was lost.
func (c *transferClaim) check() error {
	if c.lost.Load() {
		return errClaimLost
	}
	return nil
}

// confirm renews the lease at once, before bytes are acknowledged, so a
// request that lost it (renewals come only every third of the ttl)
// acknowledges nothing: the window in which two writers could both think
// they hold a transfer shrinks to the moments between this renewal and the
// store's record of the new offset, which is itself a compare-and-set on
// the old one.
func (c *transferClaim) confirm() error {
	if c.lost.Load() {
		return c.lostErr()
	}
	held, err := c.s.store.TryLease(c.name, c.holder, c.s.cfg.TusLeaseTTL)
	if err != nil {
		return err
	}
	if !held {
		c.lost.Store(true)
		return c.lostErr()
	}
	return nil
}

func (c *transferClaim) lostErr() error {
	return c.s.transferLocked(c.name, "this request lost its claim on the transfer; retry from the offset HEAD gives")
}

// transferLocked is the 423 of a transfer whose lease another holds, with
// Retry-After: the time left on that lease (rounded up to whole seconds when
// written), or a second when it ended meanwhile.
func (s *Server) transferLocked(lease, msg string) error {
	retry := time.Second
	if _, until, err := s.store.LeaseHolder(lease); err == nil && !until.IsZero() {
		retry = max(until.Sub(s.now()), time.Second)
	}
	return &fault.Error{Code: fault.ECodeTransferLocked, Message: msg, RetryAfter: retry}
}

// release stops the renewals and gives the lease up.
func (c *transferClaim) release() {
	close(c.stop)
	<-c.done
	if err := c.s.store.ReleaseLease(c.name, c.holder); err != nil {
		c.s.log.Error().Err(err).Str("lease", c.name).Msg("release a transfer's lease; it lapses on its own")
	}
}

// guard makes body fail once the lease is lost.
func (c *transferClaim) guard(body io.Reader) io.Reader { return claimedReader{body, c} }

type claimedReader struct {
	r io.Reader
	c *transferClaim
}

func (g claimedReader) Read(p []byte) (int, error) {
	if err := g.c.check(); err != nil {
		return 0, err
	}
	return g.r.Read(p)
}

// tusBufPool holds the copy buffers of PATCH bodies, so a transfer of any
// size takes constant memory.
var tusBufPool = sync.Pool{New: func() any {
	b := make([]byte, 1<<20)
	return &b
}}

// appendBody writes body into the transfer's partial file from its offset
// and returns the new offset; claim is the request's lease on the transfer,
// and once it is lost nothing more is acknowledged. Bytes are acknowledged in steps of at most
// tusCheckpoint: written, fsynced, then recorded with the hash state after
// them. When the body breaks off (the client went away) the bytes that did
// arrive are acknowledged before the error returns, so the client resumes
// after them. The last byte completes the transfer.
func (s *Server) appendBody(body io.Reader, claim *transferClaim, accountID, uploadID string, t *kv.Transfer) (int64, error) {
	h := blobs.NewHash()
	if t.HashState != nil {
		if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(t.HashState); err != nil {
			return 0, fmt.Errorf("restore the hash state of transfer %s: %w", t.ID, err)
		}
	}
	p, err := s.blobs.OpenPartial(t.ID, t.Hash, t.Offset)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	buf := tusBufPool.Get().(*[]byte)
	defer tusBufPool.Put(buf)
	for {
		from := t.Offset
		step := min(tusCheckpoint, t.Length-from)
		// The wrappers hide WriterTo and ReaderFrom, which would make
		// CopyBuffer ignore the buffer.
		n, err := io.CopyBuffer(struct{ io.Writer }{io.MultiWriter(p, h)}, struct{ io.Reader }{io.LimitReader(body, step)}, *buf)
		var readErr *fault.Error
		if errors.Is(err, errClaimLost) {
			return 0, claim.lostErr()
		}
		if err != nil && !errors.As(err, &readErr) {
			return 0, err // a write failed: nothing more is acknowledged
		}
		if n > 0 {
			if err := claim.confirm(); err != nil {
				return 0, err
			}
		}
		to := from + n
		if to == t.Length {
			if err == nil && moreBody(body) {
				return 0, fault.Errorf(fault.ECodeTooLarge, "the body passes the upload's length")
			}
			if err := p.Sync(); err != nil {
				return 0, err
			}
			return to, s.completeTransfer(p, h, accountID, uploadID, t, from)
		}
		if n > 0 {
			if err := p.Sync(); err != nil {
				return 0, err
			}
			state, merr := h.(encoding.BinaryMarshaler).MarshalBinary()
			if merr != nil {
				return 0, merr
			}
			if err := s.store.AdvanceTransfer(accountID, uploadID, t.ID, from, to, state, uploadIdle); err != nil {
				return 0, err
			}
			t.Offset, t.HashState = to, state
		}
		if err != nil || n < step {
			return t.Offset, err
		}
	}
}

// moreBody reports whether body holds another byte.
func moreBody(body io.Reader) bool {
	var one [1]byte
	n, _ := io.ReadFull(body, one[:])
	return n == 1
}

// completeTransfer ends a transfer whose bytes are all durable in its
// partial upload (the last ones from offset from on, not yet recorded): a
// hash other than the declared one discards the transfer; else the bytes
// become the blob and the session records it as a PUT would (the quota
// included). The partial becomes the blob by a move that leaves it no
// writable name or handle, so when the record is refused, or a crash comes
// between the two steps, the transfer stays at from and its bytes are the
// blob's: a resume from there reopens the partial as completed, hashes what
// the client sends again without writing it, and records the blob found in
// place. Nothing a client sends can reach a file that has its address.
func (s *Server) completeTransfer(p blobs.Partial, h hash.Hash, accountID, uploadID string, t *kv.Transfer, from int64) error {
	if blobs.Address(h) != t.Hash {
		if err := s.store.DiscardTransfer(accountID, uploadID, t.ID); err != nil {
			return err
		}
		s.removePartials()
		return fault.FieldErrorf(fault.ECodeHashMismatch, "hash", "the uploaded bytes do not hash to the declared hash; the transfer was discarded and nothing was stored")
	}
	if _, err := p.Complete(t.Hash); err != nil {
		return err
	}
	crashPoint("tus-named")
	if _, err := s.store.CompleteTransfer(accountID, uploadID, t.ID, from, uploadIdle); err != nil {
		return err
	}
	s.removePartials()
	return nil
}

// removePartials deletes the partial files of deleted transfers. The store
// queues them because no file is touched inside a transaction; what fails
// here is logged and stays queued for the next call (the sweeper calls it on
// every tick).
func (s *Server) removePartials() {
	const page = 100
	for {
		ids, err := s.store.TransferRemovals(page)
		if err != nil {
			s.log.Error().Err(err).Msg("list partial files to remove")
			return
		}
		var gone []string
		for _, id := range ids {
			if err := s.blobs.RemovePartial(id); err != nil {
				s.log.Error().Err(err).Msg("remove a partial file")
				continue
			}
			gone = append(gone, id)
		}
		if len(gone) > 0 {
			if err := s.store.ForgetTransferRemovals(gone); err != nil {
				s.log.Error().Err(err).Msg("forget removed partial files")
				return
			}
		}
		if len(ids) < page || len(gone) < len(ids) {
			return
		}
	}
}
