package kv

import "sealbox/kv/bolt"

// openFile opens the store in the bbolt file at path, as cli does.
func openFile(path string, opts Options) (*Store, error) {
	e, err := bolt.Open(path, bolt.Options{ReadOnly: opts.ReadOnly})
	if err != nil {
		return nil, err
	}
	return OpenEngine(e, path, opts)
}
