package admin

import (
	"io"
	"time"

	"sealbox/kv"
	"sealbox/kv/bolt"
)

// MappedBudget is how much of a bbolt store file an admin command keeps
// mapped in its resident memory (bolt.Options.MappedBudget): check, gc,
// backup and restore read every page of the store, and without it their
// resident set would grow to the file's size.
const MappedBudget = 64 << 20

// A data directory's store, and so a backup's, is a bbolt file whatever
// engine the instance runs on (kv.Store.WriteSnapshot): this file is the
// one of cli/admin that opens and copies such files. cli, the composition
// root, chooses the engines of the instance itself.

// openFile opens the store in the bbolt file at path (a snapshot being
// copied, a restored data directory), read-only when opts is.
func openFile(path string, opts kv.Options) (*kv.Store, error) {
	opts.ScratchEngine = bolt.OpenScratch
	e, err := bolt.Open(path, bolt.Options{ReadOnly: opts.ReadOnly, MappedBudget: MappedBudget})
	if err != nil {
		return nil, err
	}
	return kv.OpenEngine(e, path, opts)
}

// copyFile writes a consistent copy of the store file at path to w, as of
// one read transaction and whatever its format, through the engine's
// snapshot ability (bolt.CopyFile): a file a server holds fails with
// kv.ErrLocked after timeout instead of being copied mid-write.
func copyFile(path string, w io.Writer, timeout time.Duration) (int64, error) {
	return bolt.CopyFile(path, w, timeout)
}
