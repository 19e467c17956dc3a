package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"sealbox/blobs"
	"sealbox/kv"
	"sealbox/server/blobhttp"
)

// A blob of at most Config.InlineMax bytes is kept in the store (kv's
// inline_blobs), in the transaction that records it: a lifecycle op's
// manifest and metadata, and a small blob PUT. Its bytes never become a
// file of the blob engine, so an op costs one store commit instead of two
// more durable file creations (on S3, two more PUTs). Larger blobs, and
// every tus transfer's result, are files as before. Reads resolve a blob to
// either kind in one place, openBlob; the contract does not tell them apart.

// inlines reports whether a blob of n bytes is kept inline. An empty blob
// is a file, as before: nothing is saved by keeping it inline.
func (s *Server) inlines(n int) bool { return n > 0 && int64(n) <= s.cfg.InlineMax }

// putBlob stores the body of a blob PUT that must hash to hash, at most
// s.cfg.MaxBlob bytes: a body of at most InlineMax bytes is returned with
// its bytes (Blob.Data), for the store to keep inline in the transaction
// that records it, and nothing is written here; a larger body is streamed
// into the blob engine. Either way a body that does not hash to hash is
// refused (blobs.ErrHashMismatch) with nothing stored.
func (s *Server) putBlob(body io.Reader, hash string, length int64) (kv.Blob, error) {
	var head []byte
	if s.cfg.InlineMax > 0 {
		// Read into a buffer of the size uploadBuffers reserved (putBuffer),
		// not one that grows past it as io.ReadAll's does.
		size := s.cfg.InlineMax + 1
		if length >= 0 && length < size {
			size = length
		}
		head = make([]byte, size)
		n, err := io.ReadFull(body, head)
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return kv.Blob{}, err
		}
		head = head[:n]
		if s.inlines(len(head)) && int64(len(head)) <= s.cfg.MaxBlob {
			if blobs.AddressOf(head) != hash {
				return kv.Blob{}, blobs.ErrHashMismatch
			}
			return kv.Blob{Hash: hash, Size: int64(len(head)), Data: head}, nil
		}
	}
	info, _, err := s.blobs.Put(io.MultiReader(bytes.NewReader(head), body), hash, s.putLimit(length))
	return kv.Blob{Hash: info.Hash, Size: info.Size}, err
}

// openBlob opens the bytes of the recorded blob b for reading, wherever
// they are kept: the store's inline copy or the blob engine's file (whose
// size the record spares the engine a request to learn; on S3, a HEAD
// before every read). A blob recorded but missing is damage to report
// (500, logged), never a 404.
func (s *Server) openBlob(b kv.Blob) (io.ReadSeekCloser, error) {
	if b.Inline {
		return s.openInline(b)
	}
	f, err := s.blobs.OpenSized(b.Hash, b.Size)
	if errors.Is(err, blobs.ErrNotFound) {
		// Another node's start may have moved the blob inline between the
		// read of its record and this open: the move commits the inline
		// copy before it removes the file, so the copy is there.
		if inline, ierr := s.openInline(b); ierr == nil {
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
		return &movedInline{ReadSeekCloser: f, inline: func() (io.ReadSeekCloser, error) { return s.openInline(b) }}, nil
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
func (s *Server) openInline(b kv.Blob) (io.ReadSeekCloser, error) {
	data, err := s.store.InlineBlob(b.Hash)
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
