package admin

import (
	"io"
	"time"

	"sealbox/kv"
)

// StoreFiles is what the admin commands need of store files: a data
// directory's store, and so a backup's, is a bbolt file whatever engine the
// instance runs on (kv.Store.WriteSnapshot). cli, the composition root,
// implements it with the bbolt engine, so that this package names no
// engine.
type StoreFiles interface {
	// Open opens the store in the file at path (a snapshot being copied, a
	// restored data directory), read-only when opts is.
	Open(path string, opts kv.Options) (*kv.Store, error)
	// Copy writes a consistent copy of the store file at path to w, as of
	// one read transaction and whatever its format, through the engine's
	// snapshot ability: a file a server holds fails with kv.ErrLocked after
	// timeout instead of being copied mid-write.
	Copy(path string, w io.Writer, timeout time.Duration) (int64, error)
}
