package blobs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// whole reports whether the file at path is the blob hash of size bytes:
// its size first (cheap, and what a truncation changes), then its bytes'
// hash. A size < 0 is not known for certain (Adopt's caller only vouches
// for its file): then the hash alone decides. A put that finds a file
// already at a blob's address adopts it only when it is whole, so a damaged
// file is never recorded as the blob (nor its size as the blob's). A
// missing file is fs.ErrNotExist.
func whole(path, hash string, size int64) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || (size >= 0 && fi.Size() != size) {
		return false, err
	}
	h := NewHash()
	if _, err := CopyBuffer(h, f); err != nil {
		return false, err
	}
	return Address(h) == hash, nil
}

// replace puts the file at src in place of the damaged blob file at dst
// under a name of its own first, then by one rename: readers see the old
// file or the new one, never a mix, and src keeps its name. The caller has
// made src's bytes durable and makes dst's name durable.
func (s *Dir) replace(src, dst, hash string) error {
	var r [8]byte
	rand.Read(r[:])
	tmp := filepath.Join(s.tmp, "replace-"+hex.EncodeToString(r[:]))
	if err := os.Link(src, tmp); err != nil {
		return err
	}
	s.files.removed(hash)
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// linkThenRemove moves src to dst unless dst exists (fs.ErrExist then), by
// link(2) and then removing src: for a moment the file has both names, so a
// crash can leave both, which OpenPartial recognises by the link count and
// resolves by dropping the partial's name.
func linkThenRemove(src, dst string) error {
	if err := os.Link(src, dst); err != nil {
		return err
	}
	if err := os.Remove(src); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
