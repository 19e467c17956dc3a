package kv

import (
	"fmt"
	"io"
)

// WriteSnapshot writes a consistent copy of the whole store to w, as of one
// read transaction; writers go on meanwhile. Only an engine with a file
// has one (ErrNoSnapshot otherwise).
func (s *Store) WriteSnapshot(w io.Writer) (int64, error) {
	snap, ok := s.engine.(Snapshotter)
	if !ok {
		return 0, ErrNoSnapshot
	}
	return snap.WriteSnapshot(w)
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
