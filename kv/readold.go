package kv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// openMigratedCopy opens, read-only, a store of an older format without
// migrating it: every bucket of src is copied, as of one read transaction,
// into a scratch engine file (Options.ScratchEngine) in a temporary
// directory, and that copy is migrated and read instead. So backup and check work on a store the
// running binary has not migrated yet ("back up with the new binary, then
// upgrade"), and src is never written. WriteSnapshot still writes src as it
// is, in its own format, so a backup of it restores under the older binary
// too. The copy is removed when the store is closed.
func openMigratedCopy(src Engine, where string, opts Options) (*Store, error) {
	dir, err := os.MkdirTemp("", "sealbox-read-")
	if err != nil {
		return nil, err
	}
	scratch, err := opts.ScratchEngine(filepath.Join(dir, "store.db"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	fail := func(err error) (*Store, error) {
		scratch.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("read %s through a migrated copy: %w", where, err)
	}
	existing, err := src.Buckets()
	if err != nil {
		return fail(err)
	}
	var names [][]byte
	for name := range existing {
		names = append(names, []byte(name))
	}
	slices.SortFunc(names, func(a, b []byte) int { return slices.Compare(a, b) })
	if err := scratch.CreateBuckets(names); err != nil {
		return fail(err)
	}
	err = src.View(func(tx Tx) error {
		for _, name := range names {
			if err := copyBucket(scratch, name, tx.Bucket(name)); err != nil {
				return fmt.Errorf("copy bucket %s: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		return fail(err)
	}
	copyOpts := opts
	copyOpts.ReadOnly, copyOpts.NoMigrate = false, false
	s := newStore(scratch, where, copyOpts)
	s.original, s.scratchDir = src, dir
	// A backup of it writes the original, in its own format.
	original := &Store{engine: src, where: where}
	s.snapshot = original.snapshotStrategy(src, opts.ScratchEngine)
	if err := s.prepare(copyOpts); err != nil {
		return fail(err)
	}
	return s, nil
}

// closeCopy closes the engine a store read through a migrated copy was
// copied from and removes the copy; nothing for any other store.
func (s *Store) closeCopy() error {
	if s.original == nil {
		return nil
	}
	return errors.Join(s.original.Close(), os.RemoveAll(s.scratchDir))
}
