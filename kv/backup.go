package kv

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteSnapshot writes a consistent copy of the whole store to w, as of one
// read transaction; writers go on meanwhile. The copy is always a bbolt
// file: an engine with a file (bbolt) copies it as it is, and any other
// (PostgreSQL) is copied record by record into a scratch bbolt file that is
// then written out (copySnapshot). So a backup of a store in PostgreSQL is a
// data directory like any other, which restore checks and serve starts on.
func (s *Store) WriteSnapshot(w io.Writer) (int64, error) {
	if s.original != nil {
		// A store of an older format read through a migrated copy is backed
		// up as it is, so the backup also restores under the older binary.
		if snap, ok := s.original.(Snapshotter); ok {
			return snap.WriteSnapshot(w)
		}
		return (&Store{engine: s.original}).copySnapshot(w)
	}
	if snap, ok := s.engine.(Snapshotter); ok {
		return snap.WriteSnapshot(w)
	}
	return s.copySnapshot(w)
}

// copySnapshot copies every bucket, as of one read transaction of the
// store's engine, into a bbolt file in a temporary directory and writes
// that file to w. The scratch file is removed before it returns.
func (s *Store) copySnapshot(w io.Writer) (int64, error) {
	dir, err := os.MkdirTemp("", "sealbox-snapshot-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	dst, err := openScratchBolt(filepath.Join(dir, "snapshot.db"))
	if err != nil {
		return 0, err
	}
	defer dst.Close()
	names := storeBuckets()
	if err := dst.CreateBuckets(names); err != nil {
		return 0, err
	}
	err = s.view(func(src Tx) error {
		for _, name := range names {
			if err := copyBucket(dst, name, src.Bucket(name)); err != nil {
				return fmt.Errorf("copy bucket %s: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return dst.WriteSnapshot(w)
}

// copyBucket copies every pair of src into the bucket name of dst, a
// thousand pairs a transaction.
func copyBucket(dst Engine, name []byte, src Bucket) error {
	const page = 1000
	var keys, values [][]byte
	flush := func() error {
		err := dst.Update(func(tx Tx) error {
			b := tx.Bucket(name)
			for i := range keys {
				if err := b.Put(keys[i], values[i]); err != nil {
					return err
				}
			}
			return nil
		})
		keys, values = keys[:0], values[:0]
		return err
	}
	err := scanPages(src, func(k, v []byte) error {
		keys, values = append(keys, bytes.Clone(k)), append(values, bytes.Clone(v))
		if len(keys) == page {
			return flush()
		}
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}

// CheckIntegrity runs the engine's check of its own file structure (bbolt's
// page check) and returns every problem it finds; an engine without a file
// has nothing to check here.
func (s *Store) CheckIntegrity() ([]error, error) {
	snap, ok := s.engine.(Snapshotter)
	if !ok {
		return nil, nil
	}
	return snap.CheckPages()
}

// FileSize is the size of the store's file, for the metrics; ErrNoSnapshot
// for an engine without one.
func (s *Store) FileSize() (int64, error) {
	snap, ok := s.engine.(Snapshotter)
	if !ok {
		return 0, ErrNoSnapshot
	}
	return snap.Size()
}

// DanglingReferences lists references to blobs the store has no record of
// (a share link's served blob, an upload session's stored blob, an asset's
// provenance chain head), at most limit of them. Every such blob must be
// held, and so recorded, by construction: an entry here means the store is
// inconsistent.
func (s *Store) DanglingReferences(limit int) ([]string, error) {
	var out []string
	err := s.view(func(tx Tx) error {
		recorded := tx.Bucket(bucketBlobs)
		report := func(hash []byte, format string) error {
			v, err := recorded.Get(hash)
			if err == nil && v == nil {
				out = append(out, fmt.Sprintf(format, hash))
			}
			if err == nil && len(out) >= limit {
				return ErrStopScan
			}
			return err
		}
		for _, ref := range []struct {
			bucket []byte
			what   string
		}{{bucketShareBlobs, "a share link"}, {bucketUploadBlobs, "an upload session"}} {
			err := scanPages(tx.Bucket(ref.bucket), func(k, _ []byte) error {
				if len(k) < 64 {
					return nil
				}
				return report(k[len(k)-64:], "blob %s: referenced by "+ref.what+" but not recorded")
			})
			if err != nil || len(out) >= limit {
				return err
			}
		}
		return scanPages(tx.Bucket(bucketAssets), func(_, v []byte) error {
			var rec assetRecord
			if err := decode(v, &rec); err != nil {
				return err
			}
			return report([]byte(rec.Head), "blob %s: the head of a provenance chain but not recorded")
		})
	})
	return out, err
}
