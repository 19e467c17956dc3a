package blobs

import (
	"io"
	"time"
)

// Engine is what sealbox needs of a blob store: the local directory (*Dir,
// the default and the reference) and an S3-compatible bucket (*s3.Engine, package blobs/s3) both
// implement it, and the contract tests in blobs/blobstest hold both to the
// same guarantees. Each method's contract is the one documented on *Dir;
// where the S3 engine differs (FreeBytes), its own doc says so.
//
// Backup, restore and LinkFrom work on local directories only and are not
// part of it.
type Engine interface {
	Put(r io.Reader, want string, maxSize int64) (Info, bool, error)
	PutSmall(bs ...[]byte) error
	Open(hash string) (io.ReadSeekCloser, Info, error)
	OpenSized(hash string, size int64) (io.ReadSeekCloser, error)
	Stat(hash string) (Info, error)
	Collect(hash string, cutoff time.Time) (bool, error)
	Remove(hash string) error
	Verify(hash string) error
	Walk(fn func(Info) error) error
	CheckWritable() error
	Instance() (string, error)
	MarkInstance(id string) error

	OpenPartial(id, hash string, offset int64) (Partial, error)
	PartialSize(id, hash string) (int64, error)
	RemovePartial(id string) error
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
