// Package kvtest opens sealbox stores on real engines for the tests of kv,
// server and cli, as cli opens them in production, and gives them the one
// test clock. It is imported by tests only, never by the binary.
package kvtest

import (
	"context"
	"io"
	"time"

	"sealbox/kv"
	"sealbox/kv/bolt"
	"sealbox/kv/postgres"
)

// Open opens (creating it unless opts.ReadOnly) the store in the bbolt file
// at path, with bbolt's defaults.
func Open(path string, opts kv.Options) (*kv.Store, error) {
	return OpenBolt(path, opts, bolt.Options{})
}

// OpenBolt is Open with bbolt options of the test's own (a lock timeout,
// batch settings); bo.ReadOnly follows opts.ReadOnly.
func OpenBolt(path string, opts kv.Options, bo bolt.Options) (*kv.Store, error) {
	bo.ReadOnly = opts.ReadOnly
	// A read-only open of an older format reads a migrated scratch copy.
	opts.ScratchEngine = bolt.OpenScratch
	e, err := bolt.Open(path, bo)
	if err != nil {
		return nil, err
	}
	return kv.OpenEngine(e, path, opts)
}

// OpenPostgres opens the store in the PostgreSQL schema url names
// (kv/pgtest.URL), which snapshots into a scratch bbolt file as cli's does.
func OpenPostgres(url string, opts kv.Options) (*kv.Store, error) {
	e, err := postgres.Open(context.Background(), url)
	if err != nil {
		return nil, err
	}
	opts.ScratchEngine = bolt.OpenScratch
	return kv.OpenEngine(e, url, opts)
}

// StoreFiles opens and copies bbolt store files for the tests of cli/admin,
// as cli's admin.StoreFiles does (without its bound on resident memory).
type StoreFiles struct{}

// Open opens the store in the bbolt file at path, as Open does.
func (StoreFiles) Open(path string, opts kv.Options) (*kv.Store, error) { return Open(path, opts) }

// Copy writes a consistent copy of the store file at path to w
// (bolt.CopyFile).
func (StoreFiles) Copy(path string, w io.Writer, timeout time.Duration) (int64, error) {
	return bolt.CopyFile(path, w, timeout)
}
