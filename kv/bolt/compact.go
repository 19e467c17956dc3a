package bolt

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"sealbox/kv/durable"
	"sealbox/kv/engine"

	bolt "go.etcd.io/bbolt"
)

// CompactReport says what CompactFile did.
type CompactReport struct {
	Path string `json:"path"`
	// Old is where the file as it was before is kept, until the operator
	// deletes it.
	Old         string `json:"old"`
	BytesBefore int64  `json:"bytes_before"`
	BytesAfter  int64  `json:"bytes_after"`
	// Keys counts the records (every key of every bucket) the file holds,
	// the same before and after.
	Keys int `json:"keys"`
}

// compactTxBytes bounds the bytes one transaction of a compaction copies,
// and so the memory it holds.
const compactTxBytes = 16 << 20

// CompactFile rewrites the bbolt store file at path without the free pages
// bbolt never gives back to the filesystem (bolt.Compact), for a store no
// server has open: the file is opened for writing, under bbolt's exclusive
// lock, so a server holding it makes this fail with engine.ErrLocked after
// timeout, and a server starting meanwhile waits for the lock.
//
// The compacted copy is written into a new file beside the store
// (path.compact), fsynced, then opened again and checked: bbolt's page check,
// and every bucket, key and value hashed equal to the original's. Only then
// is the original kept under a second name (path.old, a hard link, so it
// costs no space) and the copy renamed over path, and the directory fsynced.
// At every moment path is a whole store: a crash leaves at most a stale
// path.compact, which the next compaction replaces.
func CompactFile(path string, timeout time.Duration) (CompactReport, error) {
	rep := CompactReport{Path: path, Old: path + ".old"}
	fi, err := os.Lstat(path)
	if err != nil {
		return rep, err
	}
	if !fi.Mode().IsRegular() {
		return rep, fmt.Errorf("%s is not a regular file", path)
	}
	rep.BytesBefore = fi.Size()
	src, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout})
	if errors.Is(err, bolt.ErrTimeout) {
		return rep, engine.ErrLocked
	}
	if err != nil {
		return rep, fmt.Errorf("open store %s: %w", path, err)
	}
	// The lock is held until the compacted file has the store's name.
	defer src.Close()
	tmp := path + ".compact"
	if err := writeCompacted(src, tmp); err != nil {
		os.Remove(tmp)
		return rep, fmt.Errorf("compact %s: %w", path, err)
	}
	if rep.Keys, err = checkCompacted(src, tmp); err != nil {
		os.Remove(tmp)
		return rep, fmt.Errorf("compact %s: the compacted copy does not check clean, the store is left as it was: %w", path, err)
	}
	if err := takeOwnerAndMode(tmp, fi); err != nil {
		os.Remove(tmp)
		return rep, fmt.Errorf("compact %s: %w", path, err)
	}
	if err := os.Remove(rep.Old); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return rep, err
	}
	if err := os.Link(path, rep.Old); err != nil {
		return rep, fmt.Errorf("keep the store as it was under %s: %w", rep.Old, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return rep, err
	}
	if err := durable.SyncDir(filepath.Dir(path)); err != nil {
		return rep, err
	}
	if fi, err = os.Stat(path); err != nil {
		return rep, err
	}
	rep.BytesAfter = fi.Size()
	return rep, nil
}

// writeCompacted copies src into a new bbolt file at tmp (replacing what an
// interrupted compaction left there, never writing through it), then
// fsyncs it. Its commits skip fsync: the file means nothing until it is
// synced once at the end and renamed.
func writeCompacted(src *bolt.DB, tmp string) error {
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	dst, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: time.Second, NoSync: true})
	if err != nil {
		return err
	}
	return durable.Close(dst, bolt.Compact(dst, src, compactTxBytes))
}

// checkCompacted opens the compacted file at tmp read-only, runs bbolt's
// page check on it and compares its content with src's, and returns the
// number of keys both hold.
func checkCompacted(src *bolt.DB, tmp string) (int, error) {
	dst, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		return 0, err
	}
	defer dst.Close()
	var problems []error
	err = dst.View(func(tx *bolt.Tx) error {
		for p := range tx.Check() {
			problems = append(problems, p)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if len(problems) > 0 {
		return 0, fmt.Errorf("bbolt's page check: %w", errors.Join(problems...))
	}
	wantSum, wantKeys, err := contentDigest(src)
	if err != nil {
		return 0, err
	}
	gotSum, gotKeys, err := contentDigest(dst)
	if err != nil {
		return 0, err
	}
	if gotKeys != wantKeys || !bytes.Equal(gotSum, wantSum) {
		return 0, fmt.Errorf("it holds %d keys and the store %d, or their bytes differ", gotKeys, wantKeys)
	}
	return wantKeys, nil
}

// contentDigest hashes everything db holds, in order: every bucket's name
// and sequence, nested buckets included, and every key and value, each
// tagged and length-prefixed so no two contents hash alike; and counts the
// keys.
func contentDigest(db *bolt.DB) (sum []byte, keys int, err error) {
	h := sha256.New()
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return digestBucket(h, name, b, &keys)
		})
	})
	return h.Sum(nil), keys, err
}

func digestBucket(h hash.Hash, name []byte, b *bolt.Bucket, keys *int) error {
	writeTagged(h, 'b', name)
	writeTagged(h, 's', binary.BigEndian.AppendUint64(nil, b.Sequence()))
	err := b.ForEach(func(k, v []byte) error {
		if v == nil {
			if nested := b.Bucket(k); nested != nil {
				return digestBucket(h, k, nested, keys)
			}
		}
		writeTagged(h, 'k', k)
		writeTagged(h, 'v', v)
		*keys++
		return nil
	})
	writeTagged(h, 'e', nil)
	return err
}

func writeTagged(h hash.Hash, tag byte, data []byte) {
	h.Write(binary.BigEndian.AppendUint64([]byte{tag}, uint64(len(data))))
	h.Write(data)
}

// takeOwnerAndMode gives the compacted copy at tmp the mode of the store it
// replaces, and its owner when this process may (root): compact run as root
// between stopping and starting the service must not leave the service's
// user a store it cannot open.
func takeOwnerAndMode(tmp string, store fs.FileInfo) error {
	if err := os.Chmod(tmp, store.Mode().Perm()); err != nil {
		return err
	}
	st, ok := store.Sys().(*syscall.Stat_t)
	if !ok || os.Geteuid() != 0 {
		return nil
	}
	if err := os.Chown(tmp, int(st.Uid), int(st.Gid)); err != nil {
		return fmt.Errorf("give the compacted copy the store's owner (%d:%d): %w", st.Uid, st.Gid, err)
	}
	return nil
}
