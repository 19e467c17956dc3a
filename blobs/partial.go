package blobs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"sealbox/kv/durable"
)

// partialsDir is the directory inside the store where uploads in progress
// (resumable transfers) keep their bytes, on the store's filesystem so a
// finished one becomes a blob by a link. Walk skips it like any other
// directory that is not a fan-out one.
const partialsDir = "tus"

// ErrPartialShort reports a partial upload holding fewer bytes than its
// caller acknowledged: the disk lost some.
var ErrPartialShort = errors.New("blobs: the partial upload holds fewer bytes than were acknowledged")

// localPartial is a Partial in a file of the store's partials directory.
type localPartial struct {
	s       *Dir
	f       *os.File
	off     int64 // where the next byte goes
	pending int64 // bytes before off not yet handed to the disk
}

// writebackStep is how many written bytes a Partial lets accumulate before
// it hands them to the disk.
const writebackStep = 1 << 20

// OpenPartial is Engine.OpenPartial. Created durably is with its
// directory entries fsynced; unacknowledged bytes (a crash, or a request
// that failed before recording them) are cut off the file. A partial that
// Complete already made the blob hash has no file of its own any more, so
// no write ever reaches a file that has its content address.
func (s *Dir) OpenPartial(id, hash string, offset int64) (Partial, error) {
	if !ValidPartialID(id) {
		return nil, fmt.Errorf("blobs: %q cannot name a partial upload", id)
	}
	if !ValidHash(hash) {
		return nil, ErrInvalidHash
	}
	dir := filepath.Join(s.dir, partialsDir)
	path := filepath.Join(dir, id)
	if offset == 0 {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
	} else if done, err := s.completedPartial(path, hash); done || err != nil {
		return &doneLocalPartial{s: s, hash: hash}, err
	}
	flags := os.O_WRONLY
	if offset == 0 {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: partial %s has no file, %d bytes acknowledged", ErrPartialShort, id, offset)
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && fi.Size() < offset {
		err = fmt.Errorf("%w: %d bytes, %d acknowledged", ErrPartialShort, fi.Size(), offset)
	}
	if err == nil && fi.Size() > offset {
		err = f.Truncate(offset)
	}
	if err == nil {
		_, err = f.Seek(offset, io.SeekStart)
	}
	if err == nil && offset == 0 {
		for _, d := range []string{dir, s.dir} {
			if err = durable.SyncDir(d); err != nil {
				break
			}
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &localPartial{s: s, f: f, off: offset}, nil
}

// completedPartial reports whether the partial at path was completed into
// blob hash: it has no file while the blob is stored, or its file is also
// the blob's (a second name: a completion without renameat2 that a crash
// interrupted), in which case the partial's name is dropped here, before
// anything could open it for writing.
func (s *Dir) completedPartial(path, hash string) (bool, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		_, err := s.Stat(hash)
		if errors.Is(err, ErrNotFound) {
			return false, nil
		}
		return err == nil, err
	case err != nil:
		return false, err
	case linkCount(fi) > 1:
		if err := os.Remove(path); err != nil {
			return false, err
		}
		return true, durable.SyncDir(filepath.Dir(path))
	}
	return false, nil
}

// doneLocalPartial is a partial that Complete already made its blob: the
// bytes written again are discarded, and Complete claims the stored blob.
type doneLocalPartial struct {
	s    *Dir
	hash string
}

func (p *doneLocalPartial) Write(b []byte) (int, error) { return len(b), nil }
func (p *doneLocalPartial) Sync() error                 { return nil }
func (p *doneLocalPartial) Close() error                { return nil }

// Complete claims the stored blob after checking that it still hashes to
// its name.
func (p *doneLocalPartial) Complete(hash string) (Info, error) {
	if hash != p.hash {
		return Info{}, fmt.Errorf("blobs: the partial is for blob %s, not %s", p.hash, hash)
	}
	now := time.Now()
	if err := os.Chtimes(p.s.path(hash), now, now); err != nil {
		return Info{}, notFound(err)
	}
	if err := p.s.Verify(hash); err != nil {
		return Info{}, err
	}
	return p.s.Stat(hash)
}

// Write appends to the partial and starts the disk writing each megabyte as
// soon as it is written, without waiting for it, so receiving a body and
// writing it to disk overlap and the Sync that acknowledges it only waits
// for the tail.
func (p *localPartial) Write(b []byte) (int, error) {
	n, err := p.f.Write(b)
	p.off += int64(n)
	p.pending += int64(n)
	if p.pending >= writebackStep {
		startWriteback(p.f, p.off-p.pending, p.pending)
		p.pending = 0
	}
	return n, err
}

// Sync makes every byte written so far durable.
func (p *localPartial) Sync() error {
	p.pending = 0
	return p.f.Sync()
}

// Close releases the partial; its bytes stay for the next OpenPartial. It
// may follow Complete.
func (p *localPartial) Close() error {
	if p.f == nil {
		return nil
	}
	return p.f.Close()
}

// Complete makes the partial's bytes, all written and synced, the blob
// hash, which its caller computed while writing them. The file is closed
// first and then moved to the blob's address by a rename that never
// replaces a file (renameNoReplace), so no writable handle or second name
// of it remains: the partial is gone, and a later OpenPartial finds it
// completed. A whole blob already stored is claimed instead and the partial
// stays until RemovePartial; a damaged one is replaced. When Complete
// returns nil the blob is durable.
func (p *localPartial) Complete(hash string) (Info, error) {
	if !ValidHash(hash) {
		return Info{}, ErrInvalidHash
	}
	src := p.f.Name()
	err := p.f.Close()
	p.f = nil
	if err != nil {
		return Info{}, err
	}
	return p.s.completeFile(src, hash, p.off)
}

// completeFile gives the file at src, size bytes hashing to hash, the name
// of the blob by a move (see Complete).
func (s *Dir) completeFile(src, hash string, size int64) (Info, error) {
	dst := s.path(hash)
	if err := s.ensureDirs(hash, true); err != nil {
		return Info{}, err
	}
	for {
		now := time.Now()
		err := os.Chtimes(dst, now, now)
		if err == nil {
			ok, err := whole(dst, hash, size)
			if errors.Is(err, fs.ErrNotExist) {
				continue // a concurrent Collect moved it aside
			}
			if err != nil {
				return Info{}, err
			}
			if !ok {
				s.files.removed(hash)
				if err := os.Rename(src, dst); err != nil {
					return Info{}, err
				}
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return Info{}, err
		} else if err := renameNoReplace(src, dst); errors.Is(err, fs.ErrExist) {
			continue // placed by a concurrent Put meanwhile: claim that one
		} else if err != nil {
			return Info{}, err
		}
		for _, d := range []string{filepath.Dir(dst), filepath.Dir(src)} {
			if err := durable.SyncDir(d); err != nil {
				return Info{}, err
			}
		}
		// A blob only claimed may have been collected between the claim
		// and this look: Stat then fails, and the caller, whose partial
		// is intact, retries.
		return s.Stat(hash)
	}
}

// PartialSize is Engine.PartialSize.
func (s *Dir) PartialSize(id, hash string) (int64, error) {
	if !ValidPartialID(id) {
		return 0, fmt.Errorf("blobs: %q cannot name a partial upload", id)
	}
	fi, err := os.Stat(filepath.Join(s.dir, partialsDir, id))
	if errors.Is(err, fs.ErrNotExist) {
		info, err := s.Stat(hash)
		if errors.Is(err, ErrNotFound) {
			return 0, nil
		}
		return info.Size, err
	}
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// RemovePartial is Engine.RemovePartial.
func (s *Dir) RemovePartial(id string) error {
	if !ValidPartialID(id) {
		return fmt.Errorf("blobs: %q cannot name a partial upload", id)
	}
	err := os.Remove(filepath.Join(s.dir, partialsDir, id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// PartialInfo describes a partial upload for garbage collection.
type PartialInfo struct {
	ID      string
	Size    int64
	ModTime time.Time
}

// StalePartials is Engine.StalePartials.
func (s *Dir) StalePartials(cutoff time.Time) ([]PartialInfo, error) {
	entries, err := os.ReadDir(filepath.Join(s.dir, partialsDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var stale []PartialInfo
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() || !ValidPartialID(e.Name()) || !info.ModTime().Before(cutoff) {
			continue
		}
		stale = append(stale, PartialInfo{ID: e.Name(), Size: info.Size(), ModTime: info.ModTime()})
	}
	return stale, nil
}

// ValidPartialID accepts the ids a caller may name a partial by: a single
// path element, so no id reaches outside the partials directory.
func ValidPartialID(id string) bool {
	return id != "" && id != "." && id != ".." && filepath.Base(id) == id && len(id) <= 255
}
