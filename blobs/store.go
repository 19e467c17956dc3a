// Package blobs is sealbox's content-addressed store of ciphertext files on
// local disk. A blob is named by the SHA-256 of its bytes (see ValidHash) and
// lives at <dir>/h[0:2]/h[2:4]/h. blobs knows nothing about HTTP or bbolt.
package blobs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"sealbox/kv/durable"
)

// Info describes a stored blob.
type Info struct {
	Hash    string
	Size    int64
	ModTime time.Time // when the blob's bytes were written
}

// Dir is a directory of blobs. It is safe for concurrent use, by goroutines
// and by several Stores open on the same directory. A blob file is never
// opened for writing once it has its address (a damaged one is replaced by
// a rename, never rewritten), and fan-out directories are never removed.
type Dir struct {
	dir string
	tmp string // temp files, on the same filesystem so link(2) works

	// synced holds the fan-out directories whose entry in their parent is
	// known to be durable, so each costs an fsync once per process.
	synced sync.Map

	group groupCommit // PutSmall's
	files openFiles   // Open's idle read handles
}

// Open opens the store rooted at dir, creating dir and dir/tmp (mode 0700) if
// missing. It removes nothing: see CleanTemp.
func Open(dir string) (*Dir, error) {
	dir = filepath.Clean(dir)
	s := &Dir{dir: dir, tmp: filepath.Join(dir, "tmp")}
	if err := os.MkdirAll(s.tmp, 0o700); err != nil {
		return nil, err
	}
	// Make the entries of dir and dir/tmp durable.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := durable.SyncDir(d); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// OpenReadOnly opens the store rooted at dir for reading only (Open, Stat,
// Verify, Walk; the caller writes nothing through it) and, unlike Open,
// creates nothing: checking a data directory or a backup leaves it as it
// was. In a missing dir every blob is missing.
func OpenReadOnly(dir string) *Dir {
	dir = filepath.Clean(dir)
	return &Dir{dir: dir, tmp: filepath.Join(dir, "tmp")}
}

// Path returns the directory the blobs are rooted at.
func (s *Dir) Path() string { return s.dir }

// bufPool holds the copy buffers of Put and Verify, so streaming a blob of any
// size takes constant memory.
var bufPool = sync.Pool{New: func() any {
	b := make([]byte, copyBuffer)
	return &b
}}

// copyBuffer is the size of bufPool's buffers.
const copyBuffer = 1 << 20

// PutBuffer is the copy buffer a Put with maxSize holds
// (blobs.WriteBufferer): the pooled one, or a buffer the body fills in one
// read when maxSize bounds it below that.
func (s *Dir) PutBuffer(maxSize int64) int64 { return putBuffer(maxSize) }

func putBuffer(maxSize int64) int64 {
	if maxSize > 0 && maxSize < copyBuffer-1 {
		return maxSize + 1
	}
	return copyBuffer
}

// WriteBuffer is nothing: a Partial writes its caller's bytes straight to
// its file (blobs.WriteBufferer).
func (s *Dir) WriteBuffer(offset, n int64) int64 { return 0 }

// CopyBuffer copies src to dst through a pooled buffer. The wrappers hide
// WriterTo and ReaderFrom, which would make io.CopyBuffer ignore the buffer.
func CopyBuffer(dst io.Writer, src io.Reader) (int64, error) {
	buf := bufPool.Get().(*[]byte)
	defer bufPool.Put(buf)
	return io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, *buf)
}

// Put is Engine.Put. Durable is fsynced: the blob's file, then its
// directory, the fsync whose failure may leave a named blob behind.
func (s *Dir) Put(r io.Reader, want string, maxSize int64) (Info, bool, error) {
	if want != "" && !ValidHash(want) {
		return Info{}, false, ErrInvalidHash
	}
	f, err := os.CreateTemp(s.tmp, "put-*")
	if err != nil {
		return Info{}, false, err
	}
	defer func() {
		f.Close()
		// Once linked, the blob has its own name: removing the temp name is
		// only tidying, and a leftover is CleanTemp's to collect.
		os.Remove(f.Name())
	}()

	limit := int64(math.MaxInt64)
	if maxSize > 0 && maxSize < math.MaxInt64 {
		limit = maxSize + 1 // one byte more tells "too large" from "exactly maxSize"
	}
	h := NewHash()
	var n int64
	if size := putBuffer(maxSize); size < copyBuffer {
		n, err = io.CopyBuffer(struct{ io.Writer }{io.MultiWriter(f, h)}, struct{ io.Reader }{&io.LimitedReader{R: r, N: limit}}, make([]byte, size))
	} else {
		n, err = CopyBuffer(io.MultiWriter(f, h), &io.LimitedReader{R: r, N: limit})
	}
	if err != nil {
		return Info{}, false, err
	}
	if maxSize > 0 && n > maxSize {
		return Info{}, false, ErrTooLarge
	}
	hash := Address(h)
	if want != "" && hash != want {
		return Info{}, false, ErrHashMismatch
	}

	return s.link(f.Name(), hash, n, func() error { return durable.Close(f, nil) }, true)
}

// Adopt places the file at path into the store as the blob hash without
// copying it, for a file too large to write twice (a resumable upload
// assembled over many requests). Adopt does not read the file: the caller
// vouches that it has fsynced it and that its bytes hash to hash. path must
// be on the store's filesystem, for example in a directory of its own under
// Dir (Walk skips any directory that is not a fan-out one); across
// filesystems Adopt fails and places nothing.
//
// The blob gets a second name by link(2), so path keeps its own and the
// caller removes it when it no longer needs it: until then a crash leaves the
// caller's file intact whatever else happened. As with Put, an existing
// whole blob is never rewritten (created is then false and path is left
// unused), and when Adopt returns nil the blob's name is durable. It returns
// ErrInvalidHash for an invalid hash.
func (s *Dir) Adopt(path, hash string) (Info, bool, error) {
	if !ValidHash(hash) {
		return Info{}, false, ErrInvalidHash
	}
	// The caller's size is not trusted to judge a stored file: -1.
	return s.link(path, hash, -1, func() error { return nil }, true)
}

// LinkFrom gives s the blob hash of src by a hard link, and reports false
// when src does not hold it. src's file was hashed when it was stored and a
// blob is never rewritten, so the link shares verified bytes (backup
// generations share their blobs this way).
func (s *Dir) LinkFrom(src *Dir, hash string) (bool, error) {
	if !ValidHash(hash) {
		return false, ErrInvalidHash
	}
	path := src.path(hash)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if _, _, err := s.Adopt(path, hash); err != nil {
		return false, err
	}
	return true, nil
}

// link gives the file at src, of size bytes (-1: not known for certain),
// the name of blob hash unless that blob is already stored whole, in which
// case it claims that blob instead (see place). It
// calls prepare (to make src's bytes durable) once, and only when it will
// link, and makes the name durable before it returns unless syncNames is
// false: the caller (a group commit) then makes every name it placed
// durable at once before it reports any of them stored.
func (s *Dir) link(src, hash string, size int64, prepare func() error, syncNames bool) (Info, bool, error) {
	dst := s.path(hash)
	if err := s.ensureDirs(hash, syncNames); err != nil {
		return Info{}, false, err
	}
	prepared := false
	prepareOnce := func() error {
		if prepared {
			return nil
		}
		prepared = true
		return prepare()
	}
	for {
		created, err := s.place(src, dst, hash, size, prepareOnce)
		if err != nil {
			return Info{}, false, err
		}
		// Even when the blob was already there, a concurrent Put may have
		// placed it and not yet fsynced the directory: do it before reporting
		// success.
		if syncNames {
			if err := durable.SyncDir(filepath.Dir(dst)); err != nil {
				return Info{}, false, err
			}
		}
		info, err := s.Stat(hash)
		if errors.Is(err, ErrNotFound) {
			// A concurrent Collect moved the blob aside between the claim and
			// this look; it puts a claimed blob back, so claim it again.
			continue
		}
		return info, created, err
	}
}

// place links src (size bytes hashing to hash) to dst unless a whole blob
// is already there, in which case it claims that one, and reports whether
// it placed src. A damaged file at dst (see whole) is replaced by src.
func (s *Dir) place(src, dst, hash string, size int64, prepare func() error) (bool, error) {
	for {
		// A blob already in place is claimed by refreshing its modification
		// time: Collect keeps a file touched after its cutoff, so a blob an
		// upload is about to record is never collected under it. Filesystem
		// times are wall-clock facts, so this uses the real clock.
		now := time.Now()
		err := os.Chtimes(dst, now, now)
		if err == nil {
			ok, err := whole(dst, hash, size)
			if errors.Is(err, fs.ErrNotExist) {
				continue // a concurrent Collect moved it aside
			}
			if err != nil || ok {
				return false, err
			}
			if err := prepare(); err != nil {
				return false, err
			}
			return true, s.replace(src, dst, hash)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return false, err
		}
		if err := prepare(); err != nil {
			return false, err
		}
		// link(2) fails with EEXIST if another Put placed the blob since:
		// "create if absent" without a race, and never a rewrite.
		err = os.Link(src, dst)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return false, err
		}
	}
}

// PutBytes stores b under its SHA-256, as Put does. It suits small blobs such
// as manifests and metadata.
func (s *Dir) PutBytes(b []byte) (Info, bool, error) {
	return s.Put(bytes.NewReader(b), "", 0)
}

// Open is Engine.Open. Closing keeps the handle for the blob's next reader
// (see openFiles). It wraps an *os.File and exposes its SyscallConn, so
// net/http sends it with sendfile. Info is the blob's as of when the handle
// was first opened.
func (s *Dir) Open(hash string) (io.ReadSeekCloser, Info, error) {
	if !ValidHash(hash) {
		return nil, Info{}, ErrInvalidHash
	}
	if f := s.files.get(hash); f != nil {
		return f, f.info, nil
	}
	// Stamped before the open: a removal racing with it keeps the handle out
	// of the pool.
	stamp := s.files.stamp()
	f, err := os.Open(s.path(hash))
	if err != nil {
		return nil, Info{}, notFound(err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, Info{}, err
	}
	info := newInfo(hash, fi)
	return &blobFile{File: f, info: info, store: s, removal: stamp}, info, nil
}

// OpenSized is Engine.OpenSized. The local store ignores size; the handle
// is Open's, *os.File and sendfile included.
func (s *Dir) OpenSized(hash string, size int64) (io.ReadSeekCloser, error) {
	f, _, err := s.Open(hash)
	return f, err
}

// Stat is Engine.Stat.
func (s *Dir) Stat(hash string) (Info, error) {
	if !ValidHash(hash) {
		return Info{}, ErrInvalidHash
	}
	fi, err := os.Stat(s.path(hash))
	if err != nil {
		return Info{}, notFound(err)
	}
	return newInfo(hash, fi), nil
}

// Exists reports whether the blob is stored. It is false for an invalid hash.
func (s *Dir) Exists(hash string) bool {
	_, err := s.Stat(hash)
	return err == nil
}

// Collect is Engine.Collect. The file is first moved aside, and put back
// when a Put claimed it meanwhile. Cutoff is wall-clock time, like file
// times.
func (s *Dir) Collect(hash string, cutoff time.Time) (bool, error) {
	if !ValidHash(hash) {
		return false, ErrInvalidHash
	}
	p := s.path(hash)
	fi, err := os.Stat(p)
	if err != nil {
		return false, notFound(err)
	}
	if !fi.ModTime().Before(cutoff) {
		return false, nil
	}
	aside := filepath.Join(s.tmp, "collect-"+hash)
	s.files.removed(hash)
	if err := os.Rename(p, aside); err != nil {
		return false, notFound(err)
	}
	defer os.Remove(aside)
	fi, err = os.Stat(aside)
	if err != nil {
		return false, err
	}
	if !fi.ModTime().Before(cutoff) {
		// Claimed between the first look and the move: put it back, unless a
		// Put already placed the bytes again.
		if err := os.Link(aside, p); err != nil && !errors.Is(err, fs.ErrExist) {
			return false, err
		}
		return false, durable.SyncDir(filepath.Dir(p))
	}
	return true, durable.SyncDir(filepath.Dir(p))
}

// Remove is Engine.Remove.
func (s *Dir) Remove(hash string) error {
	if !ValidHash(hash) {
		return ErrInvalidHash
	}
	p := s.path(hash)
	s.files.removed(hash)
	if err := os.Remove(p); err != nil {
		return notFound(err)
	}
	return durable.SyncDir(filepath.Dir(p))
}

// Verify is Engine.Verify.
func (s *Dir) Verify(hash string) error {
	f, _, err := s.Open(hash)
	if err != nil {
		return err
	}
	defer f.Close()
	h := NewHash()
	if _, err := CopyBuffer(h, f); err != nil {
		return err
	}
	if Address(h) != hash {
		return ErrCorrupt
	}
	return nil
}

// Walk is Engine.Walk. It skips tmp/ and any file whose name is not a
// valid hash or that sits in the wrong fan-out directory.
func (s *Dir) Walk(fn func(Info) error) error {
	tops, err := fanoutDirs(s.dir)
	if err != nil {
		return err
	}
	for _, a := range tops {
		subs, err := fanoutDirs(filepath.Join(s.dir, a))
		if err != nil {
			return err
		}
		for _, b := range subs {
			entries, err := os.ReadDir(filepath.Join(s.dir, a, b))
			if err != nil {
				return err
			}
			for _, e := range entries {
				name := e.Name()
				if !e.Type().IsRegular() || !ValidHash(name) || name[0:2] != a || name[2:4] != b {
					continue
				}
				fi, err := e.Info()
				if errors.Is(err, fs.ErrNotExist) {
					continue // removed since ReadDir
				}
				if err != nil {
					return err
				}
				if err := fn(newInfo(name, fi)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// CleanTemp removes the temp files last written before olderThan: the leftovers
// of Puts interrupted by a crash. A Put still writing to a removed file fails
// and leaves nothing, so a cutoff well past the longest pause of an upload is
// safe to call at any time.
func (s *Dir) CleanTemp(olderThan time.Time) (removed int, err error) {
	names, err := s.staleTemp(olderThan)
	if err != nil {
		return 0, err
	}
	for _, name := range names {
		err := os.Remove(filepath.Join(s.tmp, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return removed, err
		}
		removed++
	}
	return removed, nil
}

// StaleTemp counts the temp files CleanTemp(olderThan) would remove, removing
// nothing.
func (s *Dir) StaleTemp(olderThan time.Time) (int, error) {
	names, err := s.staleTemp(olderThan)
	return len(names), err
}

// staleTemp lists the temp files last written before olderThan. A store
// opened read-only may have no tmp/: it then has no temp files.
func (s *Dir) staleTemp(olderThan time.Time) ([]string, error) {
	entries, err := os.ReadDir(s.tmp)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if fi.ModTime().Before(olderThan) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// CheckWritable is Engine.CheckWritable: a small file where Put makes its
// temp files. It does not fsync, so probing often costs little.
func (s *Dir) CheckWritable() error {
	f, err := os.CreateTemp(s.tmp, "probe-*")
	if err != nil {
		return err
	}
	_, err = f.Write([]byte{0})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if rerr := os.Remove(f.Name()); err == nil {
		err = rerr
	}
	return err
}

// path returns where the blob with a valid hash lives.
func (s *Dir) path(hash string) string {
	return filepath.Join(s.dir, hash[0:2], hash[2:4], hash)
}

// ensureDirs creates the fan-out directories of hash if missing and, if
// syncNames, makes their entries durable. A directory found already there is
// fsynced too: a concurrent Put may have just created it.
func (s *Dir) ensureDirs(hash string, syncNames bool) error {
	for _, d := range []string{filepath.Join(s.dir, hash[0:2]), filepath.Join(s.dir, hash[0:2], hash[2:4])} {
		if _, ok := s.synced.Load(d); ok {
			continue
		}
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if !syncNames {
			continue
		}
		if err := durable.SyncDir(filepath.Dir(d)); err != nil {
			return err
		}
		s.synced.Store(d, struct{}{})
	}
	return nil
}

// fanoutDirs lists the subdirectories of dir named by two lowercase hex
// characters, in order.
func fanoutDirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && len(e.Name()) == 2 && isLowerHex(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

func newInfo(hash string, fi fs.FileInfo) Info {
	return Info{Hash: hash, Size: fi.Size(), ModTime: fi.ModTime()}
}

func notFound(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return ErrNotFound
	}
	return err
}
