// Package content decides and finds where a blob's bytes are kept: inline
// in the store (kv's inline_blobs), in the transaction that records the
// blob, or as a file of the blob engine. It is the one owner of that
// placement: the handlers put and open blobs through it, a tus transfer's
// completion places its result with it (server/transfer writes the partial
// file, this package makes it the blob), the admin commands (backup, check,
// restore) and the dev fill walk and write them through it, and serve's
// start moves small blob files in with it. It speaks no HTTP, as
// server/transfer does not.
//
// A blob of at most the inline threshold is kept in the store: a lifecycle
// op's manifest and metadata, and a small blob PUT. Its bytes never become
// a file of the blob engine, so an op costs one store commit instead of two
// more durable file creations (on S3, two more PUTs). Larger blobs, and
// every tus transfer's result, are files. Reads resolve a blob to either
// kind in one place, Open; the contract does not tell them apart.
package content

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"sealbox/blobs"
	"sealbox/kv"
	"sealbox/server/blobhttp"
)

// Content places and opens the blobs of one store and blob engine.
type Content struct {
	store     *kv.Store
	engine    blobs.Engine
	inlineMax int64
}

// New returns the placement of blobs over store and engine: a blob of 1 to
// inlineMax bytes is kept inline (0: none is).
func New(store *kv.Store, engine blobs.Engine, inlineMax int64) *Content {
	return &Content{store: store, engine: engine, inlineMax: inlineMax}
}

// inlines reports whether a blob of n bytes is kept inline. An empty blob
// is a file: nothing is saved by keeping it inline.
func (c *Content) inlines(n int) bool { return n > 0 && int64(n) <= c.inlineMax }

// Inline returns data when the store keeps a blob of its size inline: the
// caller passes it as Blob.Data to the transaction that records the blob.
// It returns nil when the blob is a file, which the caller writes
// (PutFiles) before that transaction.
func (c *Content) Inline(data []byte) []byte {
	if c.inlines(len(data)) {
		return data
	}
	return nil
}

// PutFiles writes files, each the bytes of one blob, durably into the blob
// engine, sharing the durable file creations (file and directory fsyncs)
// with the writes of other requests at the same moment
// (blobs.Engine.PutSmall).
func (c *Content) PutFiles(files ...[]byte) error { return c.engine.PutSmall(files...) }

// Put stores the body of a blob PUT that must hash to hash, of length
// bytes when it is known (else -1), at most limit bytes (as
// blobs.Engine.Put's maxSize): a body of at most the inline threshold is
// returned with its bytes (Blob.Data), for the store to keep inline in
// the transaction that records it, and nothing is written here; a larger
// body is streamed into the blob engine. Either way a body that does not
// hash to hash is refused (blobs.ErrHashMismatch) with nothing stored.
func (c *Content) Put(body io.Reader, hash string, length, limit int64) (kv.Blob, error) {
	var head []byte
	if c.inlineMax > 0 {
		// Read into a buffer of the size the server's upload buffers
		// reserved, not one that grows past it as io.ReadAll's does.
		size := c.inlineMax + 1
		if length >= 0 && length < size {
			size = length
		}
		head = make([]byte, size)
		n, err := io.ReadFull(body, head)
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return kv.Blob{}, err
		}
		head = head[:n]
		if c.inlines(len(head)) && int64(len(head)) <= limit {
			if blobs.AddressOf(head) != hash {
				return kv.Blob{}, blobs.ErrHashMismatch
			}
			return kv.Blob{Hash: hash, Size: int64(len(head)), Data: head}, nil
		}
	}
	info, _, err := c.engine.Put(io.MultiReader(bytes.NewReader(head), body), hash, limit)
	return kv.Blob{Hash: info.Hash, Size: info.Size}, err
}

// Complete makes the bytes of the partial upload p, all written and synced
// and hashing to hash, the blob hash. A tus transfer's result is a file of
// the blob engine whatever its size: its bytes are already one, and the
// partial becomes the blob by a move that leaves it no writable name or
// handle (blobs.Partial.Complete), so nothing a client sends can reach a
// stored blob. When it returns nil the blob is durable.
func (c *Content) Complete(p blobs.Partial, hash string) error {
	_, err := p.Complete(hash)
	return err
}

// OpenShared opens the blob hash that the share link opaqueID serves (see
// kv.Store.ShareBlob), returning its record with its bytes. The store's
// read transaction has ended before the bytes are opened.
func (c *Content) OpenShared(opaqueID, hash string) (kv.Blob, io.ReadSeekCloser, error) {
	return c.openRecord(c.store.ShareBlob(opaqueID, hash))
}

// OpenHeld opens the blob hash that the account holds (see
// kv.Store.HeldBlob), returning its record with its bytes. The store's read
// transaction has ended before the bytes are opened.
func (c *Content) OpenHeld(accountID, hash string) (kv.Blob, io.ReadSeekCloser, error) {
	return c.openRecord(c.store.HeldBlob(accountID, hash))
}

func (c *Content) openRecord(b kv.Blob, err error) (kv.Blob, io.ReadSeekCloser, error) {
	if err != nil {
		return kv.Blob{}, nil, err
	}
	f, err := c.Open(b)
	return b, f, err
}

// Open opens the bytes of the recorded blob b for reading, wherever they
// are kept: the store's inline copy or the blob engine's file (whose size
// the record spares the engine a request to learn; on S3, a HEAD before
// every read). A blob recorded but missing is damage to report (500,
// logged), never a 404.
func (c *Content) Open(b kv.Blob) (io.ReadSeekCloser, error) {
	return byPlacement(b, c.openInline, c.openFile)(b)
}

// byPlacement returns inline when the store keeps the recorded blob b's
// bytes, file when the blob engine does: the one test of where a recorded
// blob is kept.
func byPlacement[T any](b kv.Blob, inline, file T) T {
	if b.Inline {
		return inline
	}
	return file
}

// openFile opens the blob engine's file of the recorded blob b, or the
// store's inline copy when the file moved inline after b was read.
func (c *Content) openFile(b kv.Blob) (io.ReadSeekCloser, error) {
	f, err := c.engine.OpenSized(b.Hash, b.Size)
	if errors.Is(err, blobs.ErrNotFound) {
		// Another node's start may have moved the blob inline between the
		// read of its record and this open: the move commits the inline
		// copy before it removes the file, so the copy is there.
		if inline, ierr := c.openInline(b); ierr == nil {
			return inline, nil
		}
		return nil, fmt.Errorf("blob %s is recorded but its file is missing: %v", b.Hash, err)
	}
	if err != nil {
		return nil, err
	}
	if _, onDemand := f.(blobhttp.RangeReader); onDemand {
		// Content fetched on demand (an S3 object) learns that it is gone
		// at its first read, not at its open, so the read falls back too.
		// A local file is returned as it is: net/http sends it with
		// sendfile, which a wrapper would hide.
		return &movedInline{ReadSeekCloser: f, inline: func() (io.ReadSeekCloser, error) { return c.openInline(b) }}, nil
	}
	return f, nil
}

// movedInline reads a blob fetched on demand until a read finds the blob's
// file gone (blobs.ErrNotFound), then the store's inline copy from the same
// position: the same bytes, as the blob is content-addressed. A blob gone
// from both places fails the read with the file's error.
type movedInline struct {
	io.ReadSeekCloser // the engine's reader, then the inline copy
	inline            func() (io.ReadSeekCloser, error)
	pos               int64
	fellBack          bool
}

func (m *movedInline) ReadRange(n int64) {
	if rr, ok := m.ReadSeekCloser.(blobhttp.RangeReader); ok {
		rr.ReadRange(n)
	}
}

func (m *movedInline) Seek(offset int64, whence int) (int64, error) {
	pos, err := m.ReadSeekCloser.Seek(offset, whence)
	if err == nil {
		m.pos = pos
	}
	return pos, err
}

func (m *movedInline) Read(p []byte) (int, error) {
	n, err := m.ReadSeekCloser.Read(p)
	m.pos += int64(n)
	if n > 0 || m.fellBack || !errors.Is(err, blobs.ErrNotFound) {
		return n, err
	}
	inline, ierr := m.inline()
	if ierr != nil {
		return 0, err
	}
	if _, serr := inline.Seek(m.pos, io.SeekStart); serr != nil {
		return 0, serr
	}
	m.ReadSeekCloser.Close()
	m.ReadSeekCloser, m.fellBack = inline, true
	return m.Read(p)
}

// openInline opens the store's inline copy of blob b.
func (c *Content) openInline(b kv.Blob) (io.ReadSeekCloser, error) {
	data, err := c.store.InlineBlob(b.Hash)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != b.Size {
		return nil, fmt.Errorf("blob %s is recorded inline with %d bytes; the store keeps %d", b.Hash, b.Size, len(data))
	}
	return nopCloser{bytes.NewReader(data)}, nil
}

// nopCloser is a ReadSeeker with nothing to close.
type nopCloser struct{ io.ReadSeeker }

func (nopCloser) Close() error { return nil }

// MoveInline completes store format 6 at serve's start: the blob files of
// at most the inline threshold move into the store (kv.Store.MoveInline),
// at once when a start with the same threshold has done it before. It
// returns how many moved. A start cut short leaves no damage and the next
// one carries on.
func (c *Content) MoveInline() (int, error) {
	return c.store.MoveInline(blobs.WholeFiles{Engine: c.engine}, c.inlineMax)
}

// walkPage is how many blob records Walk reads per read transaction.
const walkPage = 256

// Walk visits every blob store records, in hash order, reading them a page
// at a time and holding no read transaction while the visits
// run: inline for a blob the store keeps (its bytes travel with the store,
// a snapshot of it included), file for one kept as a file of the blob
// engine. It stops at the first error, or once ctx ends. store may be a
// snapshot, with no blob engine of its own.
func Walk(ctx context.Context, store *kv.Store, inline, file func(kv.Blob) error) error {
	return walkRecords(store, walkPage, func(page []kv.Blob) error {
		for _, b := range page {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := byPlacement(b, inline, file)(b); err != nil {
				return err
			}
		}
		return nil
	})
}

// WalkPages is Walk a page of at most n records at a time: fn gets each
// page's blobs, in hash order, split into those kept as files and those
// kept inline, for a caller that copies a page of files at once (and so
// bounds the bytes it holds by n). It stops at the first error, or once
// ctx ends.
func WalkPages(ctx context.Context, store *kv.Store, n int, fn func(files, inline []kv.Blob) error) error {
	return walkRecords(store, n, func(page []kv.Blob) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		var files, inline []kv.Blob
		for _, b := range page {
			kind := byPlacement(b, &inline, &files)
			*kind = append(*kind, b)
		}
		return fn(files, inline)
	})
}

// walkRecords reads the store's blob records n at a time and passes each
// non-empty page to fn once its read transaction has ended.
func walkRecords(store *kv.Store, n int, fn func([]kv.Blob) error) error {
	after := ""
	for {
		page, err := store.Blobs(after, n)
		if err != nil {
			return err
		}
		if len(page) > 0 {
			if err := fn(page); err != nil {
				return err
			}
		}
		if len(page) < n {
			return nil
		}
		after = page[len(page)-1].Hash
	}
}
