package blobs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
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
	s       *Store
	f       *os.File
	off     int64 // where the next byte goes
	pending int64 // bytes before off not yet handed to the disk
}

// writebackStep is how many written bytes a Partial lets accumulate before
// it hands them to the disk.
const writebackStep = 1 << 20

// OpenPartial opens partial id for writing at offset, creating it (durably:
// its directory entries are fsynced) at offset 0. hash is the hash the
// transfer declared; the local store keeps no use for it (the S3 engine
// names its multipart upload by it). Bytes past offset were
// written but never acknowledged (a crash, or a request that failed before
// recording them) and are cut off, so what follows offset is exactly what
// the caller writes next. A partial shorter than offset is ErrPartialShort.
func (s *Store) OpenPartial(id, hash string, offset int64) (Partial, error) {
	if !validPartialID(id) {
		return nil, fmt.Errorf("blobs: %q cannot name a partial upload", id)
	}
	dir := filepath.Join(s.dir, partialsDir)
	if offset == 0 {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, id), os.O_WRONLY|os.O_CREATE, 0o600)
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
			if err = SyncDir(d); err != nil {
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

// Close releases the partial; its bytes stay for the next OpenPartial.
func (p *localPartial) Close() error { return p.f.Close() }

// Complete makes the partial's bytes, all written and synced, the blob
// hash, which its caller computed while writing them; the partial stays
// until RemovePartial. As with Put, an existing blob is never rewritten, and
// when Complete returns nil the blob is durable.
func (p *localPartial) Complete(hash string) (Info, error) {
	info, _, err := p.s.Adopt(p.f.Name(), hash)
	return info, err
}

// PartialSize reports how many bytes partial id holds: 0 when it has none
// yet.
func (s *Store) PartialSize(id string) (int64, error) {
	if !validPartialID(id) {
		return 0, fmt.Errorf("blobs: %q cannot name a partial upload", id)
	}
	fi, err := os.Stat(filepath.Join(s.dir, partialsDir, id))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// RemovePartial deletes partial id; one that is already gone is not an
// error.
func (s *Store) RemovePartial(id string) error {
	if !validPartialID(id) {
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

// StalePartials lists the partials last written before cutoff, for the
// caller to remove those no transfer owns any more.
func (s *Store) StalePartials(cutoff time.Time) ([]PartialInfo, error) {
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
		if err != nil || !info.Mode().IsRegular() || !validPartialID(e.Name()) || !info.ModTime().Before(cutoff) {
			continue
		}
		stale = append(stale, PartialInfo{ID: e.Name(), Size: info.Size(), ModTime: info.ModTime()})
	}
	return stale, nil
}

// validPartialID accepts the ids a caller may name a partial by: a single
// path element, so no id reaches outside the partials directory.
func validPartialID(id string) bool {
	return id != "" && id != "." && id != ".." && filepath.Base(id) == id && len(id) <= 255
}
