package kv

import (
	"errors"
	"fmt"
	"io"
	"time"

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

// DanglingReferences lists references to blobs the store has no record of
// (a share link's served blob, an upload session's stored blob, an asset's
// provenance chain head), at most limit of them. Every such blob must be held, and so recorded, by
// construction: an entry here means the store is inconsistent.
func (s *Store) DanglingReferences(limit int) ([]string, error) {
	var out []string
	err := s.db.View(func(tx *bolt.Tx) error {
		recorded := tx.Bucket(bucketBlobs)
		for _, ref := range []struct {
			bucket []byte
			what   string
		}{{bucketShareBlobs, "a share link"}, {bucketUploadBlobs, "an upload session"}} {
			c := tx.Bucket(ref.bucket).Cursor()
			for k, _ := c.First(); k != nil && len(out) < limit; k, _ = c.Next() {
				if len(k) < 64 {
					continue
				}
				hash := k[len(k)-64:]
				if recorded.Get(hash) == nil {
					out = append(out, fmt.Sprintf("blob %s: referenced by %s but not recorded", hash, ref.what))
				}
			}
		}
		c := tx.Bucket(bucketAssets).Cursor()
		for k, v := c.First(); k != nil && len(out) < limit; k, v = c.Next() {
			var rec assetRecord
			if err := decode(v, &rec); err != nil {
				return err
			}
			if recorded.Get([]byte(rec.Head)) == nil {
				out = append(out, fmt.Sprintf("blob %s: the head of a provenance chain but not recorded", rec.Head))
			}
		}
		return nil
	})
	return out, err
}

// CopyFile writes a consistent copy of the store file at path to w, as of
// one read transaction, whatever format the store is in: a restore copies a
// backup first and lets Open migrate the copy, so the backup itself is only
// read. The file is opened read-only under bbolt's shared lock, so a server
// writing to it makes this fail with ErrLocked after timeout instead of
// copying a file mid-write.
func CopyFile(path string, w io.Writer, timeout time.Duration) (int64, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: timeout})
	if errors.Is(err, bolt.ErrTimeout) {
		return 0, ErrLocked
	}
	if err != nil {
		return 0, fmt.Errorf("open store %s: %w", path, err)
	}
	defer db.Close()
	var n int64
	err = db.View(func(tx *bolt.Tx) (err error) {
		n, err = tx.WriteTo(w)
		return err
	})
	return n, err
}
