package admin

import (
	"sealbox/kv"
	"sealbox/kv/bolt"
)

// MappedBudget is how much of a bbolt store file an admin command keeps
// mapped in its resident memory (bolt.Options.MappedBudget): check, gc,
// backup and restore read every page of the store, and without it their
// resident set would grow to the file's size.
const MappedBudget = 64 << 20

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
