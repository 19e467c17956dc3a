// Package transfer writes resumable uploads (tus transfers): it claims a
// transfer for one writer with a lease in the store, appends a body to the
// transfer's partial file and checkpoints it (write, fsync, then record the
// offset and hash state, fenced by the lease), completes the transfer with
// its last byte (hash check, the blob placed through server/content, the
// holding recorded under the quota) and removes the partial files of
// deleted transfers. It speaks no HTTP: server/tus.go maps the tus protocol
// onto it, as tusd's handler calls its data store's WriteChunk.
package transfer

import (
	"encoding"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"sealbox/blobs"
	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/server/content"
)

// Checkpoint bounds the bytes an append takes between two acknowledgements
// (fsync, then record), so a crash in the middle of a long body loses at
// most this much.
const Checkpoint = 64 << 20

// Transfers writes the transfers of one store and blob engine.
type Transfers struct {
	store *kv.Store
	// blobs keeps the partial files; content places each finished blob.
	blobs   blobs.Engine
	content *content.Content
	log     zerolog.Logger
	// leaseTTL is how long a writer's lease on a transfer lasts without
	// renewal; idle how long an upload session lives after its last write.
	leaseTTL time.Duration
	idle     time.Duration
	// removals runs one RemovePartials pass at a time for all callers.
	removals passes
}

// New returns the writer of transfers over store and engine, whose blobs
// placement (over the same two) places: leases taken for a writer last
// leaseTTL without renewal (they renew every third of it), and each write
// to a session keeps it open for idle more.
func New(store *kv.Store, engine blobs.Engine, placement *content.Content, log zerolog.Logger, leaseTTL, idle time.Duration) *Transfers {
	return &Transfers{store: store, blobs: engine, content: placement, log: log, leaseTTL: leaseTTL, idle: idle}
}

// Create records the transfer t (ID, Hash and Length set) in the account's
// session uploadID, within lim and the account's quota (see
// kv.Store.CreateTransfer). An empty one is stored at once, as an empty PUT
// is: a tus client considers an empty upload done once it is created and
// sends no bytes; its hash must be the empty blob's.
func (ts *Transfers) Create(accountID, uploadID string, t *kv.Transfer, lim kv.TransferLimits) error {
	if t.Length > 0 {
		return ts.store.CreateTransfer(accountID, uploadID, t, ts.idle, lim)
	}
	if _, err := ts.store.Upload(accountID, uploadID); err != nil {
		return err
	}
	if t.Hash != blobs.AddressOf(nil) {
		return fault.FieldErrorf(fault.ECodeHashMismatch, "hash", "an empty upload does not hash to the declared hash; nothing was stored")
	}
	blob, err := ts.content.Put(strings.NewReader(""), t.Hash, 0, 0)
	if err != nil {
		return err
	}
	_, err = ts.store.AddUploadBlob(accountID, uploadID, blob, ts.idle)
	return err
}

// Claim is one writer's hold of a transfer: its lease, renewed until
// Release.
type Claim struct {
	ts    *Transfers
	lease *kv.Lease
}

// Claim claims the transfer id for one writer, holder (unique among every
// node's writers), so that one request writes it at a time on every node
// sharing the store. A second writer, typically a client retrying while a
// server still reads its first request, is refused with
// error.transfer.locked and Retry-After the time left on the lease. A node
// killed mid-write leaves the lease to lapse after its ttl.
func (ts *Transfers) Claim(id, holder string) (*Claim, error) {
	lease, err := ts.store.TakeLease("tus/"+id, holder, ts.leaseTTL)
	if held := (*kv.LeaseHeldError)(nil); errors.As(err, &held) {
		return nil, locked("another request is writing this transfer; retry", max(held.Until.Sub(ts.store.Now()), time.Second))
	}
	if err != nil {
		return nil, err
	}
	return &Claim{ts: ts, lease: lease}, nil
}

// Release stops the lease's renewals and gives it up.
func (c *Claim) Release() {
	if err := c.lease.Release(); err != nil {
		c.ts.log.Error().Err(err).Str("lease", c.lease.Name()).Msg("release a transfer's lease; it lapses on its own")
	}
}

// locked is the refusal of a writer without the transfer's lease.
func locked(msg string, retry time.Duration) error {
	return &fault.Error{Code: fault.ECodeTransferLocked, Message: msg, RetryAfter: retry}
}

// lost is the refusal of a writer that lost its lease mid-write, with
// Retry-After the time left on the lease of whoever holds it now (a second
// when none does).
func (c *Claim) lost() error {
	c.ts.log.Warn().Str("lease", c.lease.Name()).Msg("lost a transfer's lease mid-request; it stops")
	retry := time.Second
	if _, until, err := c.ts.store.LeaseHolder(c.lease.Name()); err == nil && !until.IsZero() {
		retry = max(until.Sub(c.ts.store.Now()), time.Second)
	}
	return locked("this request lost its claim on the transfer; retry from the offset HEAD gives", retry)
}

// confirm renews the lease at once, before bytes are acknowledged or made
// the blob: a writer that lost it (renewals come only every third of the
// ttl) goes no further. The store's records are fenced by the lease too, so
// a writer that loses it between this and its record still records nothing.
func (c *Claim) confirm() error {
	err := c.lease.Confirm()
	if errors.Is(err, kv.ErrLeaseLost) {
		return c.lost()
	}
	return err
}

// Resumable returns the account's transfer id of the session uploadID if it
// can resume. The store can outlive a partial file: a backup restores the
// database but not partial files, or the disk lost them. A transfer whose
// file holds fewer bytes than it acknowledged is then discarded and
// answered as not found, so the client starts a new upload instead of
// failing at every resume.
//
// Without the transfer's lease (HEAD) this cannot discard a healthy
// transfer: a partial file never shrinks below an offset once recorded, a
// completed one counts as its blob (whole, so past every offset), and
// discard and expiry delete the record before the file, so a file found
// missing under a stale record finds the record gone too.
func (ts *Transfers) Resumable(accountID, uploadID, id string) (*kv.Transfer, error) {
	t, err := ts.store.Transfer(accountID, uploadID, id)
	if err != nil {
		return nil, err
	}
	// A transfer at offset 0 may have no bytes yet: its size is then 0.
	size, err := ts.blobs.PartialSize(id, t.Hash)
	if err != nil {
		return nil, err
	}
	if size >= t.Offset {
		return t, nil
	}
	ts.log.Warn().Str("transfer", id).Int64("offset", t.Offset).Int64("partial_bytes", size).
		Msg("a transfer's partial file lost acknowledged bytes; the transfer is discarded")
	if err := ts.store.DiscardTransfer(accountID, uploadID, id); err != nil {
		return nil, err
	}
	ts.RemovePartials()
	return nil, fault.Errorf(fault.ECodeTransferNotFound, "the transfer's received bytes were lost; start a new upload")
}

// Discard deletes the account's transfer id of the session uploadID and
// its bytes.
func (c *Claim) Discard(accountID, uploadID, id string) error {
	if err := c.ts.store.DiscardTransfer(accountID, uploadID, id); err != nil {
		return err
	}
	c.ts.RemovePartials()
	return nil
}

// BufferSize is the largest copy buffer one Append holds in memory.
const BufferSize = 1 << 20

// AppendBuffer is the copy buffer an Append to a transfer with remaining
// bytes to go holds: BufferSize, or fewer when fewer remain (the body
// cannot pass the transfer's length), so a small transfer's PATCH holds
// what it may fill.
func AppendBuffer(remaining int64) int64 { return max(1, min(BufferSize, remaining)) }

// bufPool holds the copy buffers of appended bodies, so a transfer of any
// size takes constant memory.
var bufPool = sync.Pool{New: func() any {
	b := make([]byte, BufferSize)
	return &b
}}

// errLost ends the read of a body whose writer lost its lease. It is not a
// *fault.Error, so Append acknowledges nothing after it.
var errLost = errors.New("the transfer's lease was lost")

// guarded fails its reads once the claim's lease is lost.
type guarded struct {
	r io.Reader
	c *Claim
}

func (g guarded) Read(p []byte) (int, error) {
	select {
	case <-g.c.lease.Lost():
		return 0, errLost
	default:
		return g.r.Read(p)
	}
}

// Append writes body into the transfer t (of the account's session
// uploadID) from its offset and returns the new offset. Bytes are
// acknowledged in steps of at most Checkpoint: written, fsynced, then
// recorded with the hash state after them, each record fenced by the
// claim's lease; once the lease is lost nothing more is acknowledged. When
// the body breaks off with a *fault.Error (the client went away, a read
// deadline) the bytes that did arrive are acknowledged before that error
// returns, so the client resumes after them. The last byte completes the
// transfer (see complete); a body past the length is error.too_large.
func (c *Claim) Append(body io.Reader, accountID, uploadID string, t *kv.Transfer) (int64, error) {
	h := blobs.NewHash()
	if t.HashState != nil {
		if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(t.HashState); err != nil {
			return 0, fmt.Errorf("restore the hash state of transfer %s: %w", t.ID, err)
		}
	}
	p, err := c.ts.blobs.OpenPartial(t.ID, t.Hash, t.Offset)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	body = guarded{body, c}
	buf := &[]byte{}
	if size := AppendBuffer(t.Length - t.Offset); size < BufferSize {
		*buf = make([]byte, size)
	} else {
		buf = bufPool.Get().(*[]byte)
		defer bufPool.Put(buf)
	}
	for {
		from := t.Offset
		step := min(Checkpoint, t.Length-from)
		// The wrappers hide WriterTo and ReaderFrom, which would make
		// CopyBuffer ignore the buffer.
		n, err := io.CopyBuffer(struct{ io.Writer }{io.MultiWriter(p, h)}, struct{ io.Reader }{io.LimitReader(body, step)}, *buf)
		var readErr *fault.Error
		if errors.Is(err, errLost) {
			return 0, c.lost()
		}
		if err != nil && !errors.As(err, &readErr) {
			return 0, err // a write failed: nothing more is acknowledged
		}
		if n > 0 {
			if err := c.confirm(); err != nil {
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
			return to, c.complete(p, h, accountID, uploadID, t, from)
		}
		if n > 0 {
			if err := c.checkpoint(p, h, accountID, uploadID, t, to); err != nil {
				return 0, err
			}
		}
		if err != nil || n < step {
			return t.Offset, err
		}
	}
}

// checkpoint makes the bytes written to p up to offset to durable, then
// records them with the hash state after them, and moves t there.
func (c *Claim) checkpoint(p blobs.Partial, h hash.Hash, accountID, uploadID string, t *kv.Transfer, to int64) error {
	if err := p.Sync(); err != nil {
		return err
	}
	state, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		return err
	}
	if err := c.ts.store.AdvanceTransfer(accountID, uploadID, t.ID, c.lease.Fence(), t.Offset, to, state, c.ts.idle); err != nil {
		return err
	}
	t.Offset, t.HashState = to, state
	return nil
}

// moreBody reports whether body holds another byte.
func moreBody(body io.Reader) bool {
	var one [1]byte
	n, _ := io.ReadFull(body, one[:])
	return n == 1
}

// complete ends a transfer whose bytes are all durable in its partial
// upload (the last ones from offset from on, not yet recorded): a hash
// other than the declared one discards the transfer; else the bytes become
// the blob and the session records it as a PUT would (the quota included).
// The partial becomes the blob by a move that leaves it no writable name or
// handle, so when the record is refused, or a crash comes between the two
// steps, the transfer stays at from and its bytes are the blob's: a resume
// from there reopens the partial as completed, hashes what the client sends
// again without writing it, and records the blob found in place. Nothing a
// client sends can reach a file that has its address.
func (c *Claim) complete(p blobs.Partial, h hash.Hash, accountID, uploadID string, t *kv.Transfer, from int64) error {
	if blobs.Address(h) != t.Hash {
		if err := c.Discard(accountID, uploadID, t.ID); err != nil {
			return err
		}
		return fault.FieldErrorf(fault.ECodeHashMismatch, "hash", "the uploaded bytes do not hash to the declared hash; the transfer was discarded and nothing was stored")
	}
	if err := c.ts.content.Complete(p, t.Hash); err != nil {
		return err
	}
	crashPoint("tus-named")
	if _, err := c.ts.store.CompleteTransfer(accountID, uploadID, t.ID, c.lease.Fence(), from, c.ts.idle); err != nil {
		return err
	}
	c.ts.RemovePartials()
	return nil
}

// RemovePartials deletes the partial files of deleted transfers (see
// RemovePartials, the function), those queued before the call included,
// in one pass at a time: concurrent callers (every completed transfer
// calls it) wait for a pass that starts after their call instead of each
// removing, and forgetting, the same partials, which on PostgreSQL all but
// one of them lost.
func (ts *Transfers) RemovePartials() {
	ts.removals.run(func() { RemovePartials(ts.store, ts.blobs, ts.log) })
}

// passes runs a pass for its callers one at a time; each caller returns
// once a pass that started after its call has ended, so the callers that
// come during a pass share the next one.
type passes struct {
	mu                sync.Mutex
	cond              *sync.Cond
	running           bool
	started, finished uint64
}

func (p *passes) run(pass func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cond == nil {
		p.cond = sync.NewCond(&p.mu)
	}
	for want := p.started + 1; p.finished < want; {
		if p.running {
			p.cond.Wait()
			continue
		}
		p.running = true
		p.started++
		p.mu.Unlock()
		func() {
			defer func() {
				p.mu.Lock()
				p.running = false
				p.finished = p.started
				p.cond.Broadcast()
			}()
			pass()
		}()
	}
}

// RemovePartials deletes the partial files of deleted transfers from engine.
// The store queues them because no file is touched inside a transaction;
// what fails here is logged and stays queued for the next call (the
// maintenance runner calls it on every tick).
func RemovePartials(store *kv.Store, engine blobs.Engine, log zerolog.Logger) {
	const page = 100
	for {
		ids, err := store.TransferRemovals(page)
		if err != nil {
			log.Error().Err(err).Msg("list partial files to remove")
			return
		}
		var gone []string
		for _, id := range ids {
			if err := engine.RemovePartial(id); err != nil {
				log.Error().Err(err).Msg("remove a partial file")
				continue
			}
			gone = append(gone, id)
		}
		if len(gone) > 0 {
			if err := store.ForgetTransferRemovals(gone); err != nil {
				log.Error().Err(err).Msg("forget removed partial files")
				return
			}
		}
		if len(ids) < page || len(gone) < len(ids) {
			return
		}
	}
}
