package admin

import (
	"sealbox/kv"
	"sealbox/kv/bolt"
)

// openFile opens the store in the bbolt file at path (a snapshot being
// copied, a restored data directory), read-only when opts is.
func openFile(path string, opts kv.Options) (*kv.Store, error) {
	opts.ScratchEngine = bolt.OpenScratch
	e, err := bolt.Open(path, bolt.Options{ReadOnly: opts.ReadOnly})
	if err != nil {
		return nil, err
	}
	return kv.OpenEngine(e, path, opts)
}
