package blobs

import (
	"io"
	"time"
)

// Engine is what sealbox needs of a blob store: the local directory (*Dir,
// the default and the reference) and an S3-compatible bucket (*s3.Engine,
// package blobs/s3) both implement it, and the contract tests in
// blobs/blobstest hold both to the guarantees stated here. A blob is named
// by the SHA-256 of its bytes (ValidHash) and is never rewritten once it
// has its name. An engine is safe for concurrent use, by goroutines and by
// several processes on the same store.
//
// Backup, restore and LinkFrom work on local directories only and are not
// part of it.
type Engine interface {
	// Put streams r into the store and returns the blob's Info, and
	// created=true if this call placed it (false if it was already stored
	// whole; it is then left untouched, while a damaged copy found there is
	// replaced by these bytes). If want is not "", the bytes must hash to
	// want, else Put returns ErrHashMismatch; an invalid want is
	// ErrInvalidHash. Reading more than maxSize bytes returns ErrTooLarge;
	// maxSize <= 0 means no limit. An error from r is returned as is.
	//
	// When Put returns nil the blob's bytes and name are durable. On any
	// error nothing is left behind, with one exception: when making the
	// name durable fails after the blob got it, the blob may remain.
	// Concurrent Puts of the same bytes all
	// succeed, and exactly one reports created=true.
	Put(r io.Reader, want string, maxSize int64) (Info, bool, error)
	// PutSmall stores each of bs under its SHA-256 and returns nil once all
	// of them are durable, with Put's guarantee. It suits small blobs
	// written by many concurrent requests (the manifests and metadata of
	// lifecycle ops). On an error some of the blobs may be stored and
	// others not; none is half-written.
	PutSmall(bs ...[]byte) error
	// Open opens the blob for reading, at its first byte; the caller
	// closes it. Info's size never changes; its modification time may
	// move (a claim by Put). It returns ErrInvalidHash or ErrNotFound.
	Open(hash string) (io.ReadSeekCloser, Info, error)
	// OpenSized opens the blob as Open does, for a caller that knows its
	// size (the store records every blob's), so an engine can spare the
	// look-up of it.
	OpenSized(hash string, size int64) (io.ReadSeekCloser, error)
	// Stat returns the blob's Info. It returns ErrInvalidHash or
	// ErrNotFound.
	Stat(hash string) (Info, error)
	// Collect removes the blob if it was last written or claimed (by a Put
	// of the same bytes) before cutoff, and reports whether it did. It is
	// safe against a concurrent Put: a blob a Put claimed meanwhile stays.
	Collect(hash string, cutoff time.Time) (bool, error)
	// Remove deletes the blob, durably, for garbage collection. It returns
	// ErrInvalidHash or ErrNotFound. Readers that already opened it keep
	// reading.
	Remove(hash string) error
	// Verify re-reads the blob and returns ErrCorrupt if its bytes no
	// longer hash to its name. It returns ErrInvalidHash or ErrNotFound.
	Verify(hash string) error
	// Walk calls fn for every stored blob, in hash order, and stops at the
	// first error fn returns. Blobs put or removed during the walk may or
	// may not be visited.
	Walk(fn func(Info) error) error
	// CheckWritable writes and removes a small probe where Put writes, for
	// a readiness probe: a store that cannot write refuses every upload.
	CheckWritable() error
	// Instance returns the id in the store's instance marker, or "" when
	// the store has none.
	Instance() (string, error)
	// MarkInstance writes the instance marker holding id, durably and only
	// if the store has none. A store already marked with id is left as it
	// is; one marked with another id is refused: ErrMarked.
	MarkInstance(id string) error

	// OpenPartial opens partial id for writing at offset, creating it
	// durably at offset 0; hash is the hash the transfer declared. Bytes
	// past offset were never acknowledged and are discarded, so what
	// follows offset is exactly what the caller writes next. A partial
	// shorter than offset is ErrPartialShort. A partial that Complete
	// already made the blob hash opens, past offset 0, as completed (see
	// Partial.Complete).
	OpenPartial(id, hash string, offset int64) (Partial, error)
	// PartialSize reports how many bytes partial id, for blob hash, holds:
	// 0 when it has none yet, the blob's size once Complete made it the
	// blob.
	PartialSize(id, hash string) (int64, error)
	// RemovePartial deletes partial id; one that is already gone is not an
	// error.
	RemovePartial(id string) error
	// StalePartials lists the partials last written before cutoff, for the
	// caller to remove those no transfer owns any more.
	StalePartials(cutoff time.Time) ([]PartialInfo, error)
}

// TempCleaner is an engine that keeps what interrupted work leaves behind
// (temp files, orphan multipart uploads) until told to remove it; cli's gc
// asks for it.
type TempCleaner interface {
	// CleanTemp removes what interrupted work left before olderThan and
	// returns how many items it removed.
	CleanTemp(olderThan time.Time) (int, error)
	// StaleTemp counts what CleanTemp(olderThan) would remove, removing
	// nothing.
	StaleTemp(olderThan time.Time) (int, error)
}

// WriteBufferer is an engine that holds bytes of a write in memory on their
// way to storage: what it tells is what a write holds, so that the server
// can count it before it reads an upload's body.
type WriteBufferer interface {
	// PutBuffer is the most one Put whose maxSize is maxSize (0: no
	// bound) holds at a time. A Put bounded below the engine's buffer
	// holds a buffer of maxSize+1 bytes (the one more tells a body that is
	// too large), not the engine's largest.
	PutBuffer(maxSize int64) int64
	// WriteBuffer is the most a Partial opened at offset holds while n
	// more bytes (n < 0: any number) are written to it.
	WriteBuffer(offset, n int64) int64
}

// FreeSpacer is an engine on a filesystem whose free space runs out; the
// readiness probe asks for it and checks no disk for an engine without one
// (a bucket has no free-space figure).
type FreeSpacer interface {
	// FreeBytes is the space left to the engine's writes.
	FreeBytes() (int64, error)
}

// Partial is an upload in progress that the engine owns, named by its
// caller's id (a transfer id): bytes written from an offset, made durable by
// Sync, then completed into a blob or removed. Callers never see where it
// lives.
//
// The caller writes bytes in order, calls Sync, and only then records the
// new offset (its acknowledgement), and it calls Sync again only after that
// record succeeded (the S3 engine then drops what only older offsets
// needed). OpenPartial at any recorded offset, in this process or another,
// continues from there; what was written past it is discarded.
type Partial interface {
	io.Writer
	// Sync makes every byte written so far durable.
	Sync() error
	// Complete makes the partial's bytes, all written and synced, the blob
	// hash, which its caller computed while writing them and which must be
	// the hash given to OpenPartial. An existing whole blob is never
	// rewritten, and when Complete returns nil the blob is durable. Once the
	// bytes have the blob's name nothing writes them again: an OpenPartial
	// of the partial past offset 0 then opens it as completed (writes are
	// discarded, Complete claims the stored blob), so a caller that crashed
	// or refused to record the completion can never write into the blob.
	// What is left of the partial's own storage stays until RemovePartial.
	Complete(hash string) (Info, error)
	// Close releases the partial; its synced bytes stay for the next
	// OpenPartial.
	Close() error
}

var (
	_ Engine      = (*Dir)(nil)
	_ TempCleaner = (*Dir)(nil)
	_ FreeSpacer  = (*Dir)(nil)
	_ Partial     = (*localPartial)(nil)
)
