package kv

import (
	"io"

	bolt "go.etcd.io/bbolt"
)

// WriteSnapshot writes a consistent copy of the whole database to w, as of
// one read transaction; writers go on meanwhile. This is the one place that
// does I/O inside a transaction: bbolt's own hot-backup method, which needs
// the read transaction to hold the pages it copies.
func (s *Store) WriteSnapshot(w io.Writer) (int64, error) {
	var n int64
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		n, err = tx.WriteTo(w)
		return err
	})
	return n, err
}

// CheckIntegrity runs bbolt's page-level consistency check and returns
// every problem it finds.
func (s *Store) CheckIntegrity() ([]error, error) {
	var problems []error
	err := s.db.View(func(tx *bolt.Tx) error {
		for e := range tx.Check() {
			problems = append(problems, e)
		}
		return nil
	})
	return problems, err
}
