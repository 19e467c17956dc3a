// Package bolt is the default engine of sealbox's store: one bbolt file
// (go.etcd.io/bbolt), which this package alone imports. It implements
// kv/engine's Engine with the abilities of a file one process holds:
// engine.Exclusive, engine.Snapshotter and engine.AppendOnly buckets.
package bolt

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"strings"
	"time"

	"sealbox/kv/engine"

	bolt "go.etcd.io/bbolt"
)

// Engine is one bbolt file. bbolt has one writer at a time, so every Update
// is serializable by construction and runs its function once; Batch shares
// one commit's fsyncs between concurrent callers.
type Engine struct {
	db *bolt.DB
	// stopBounding stops the watcher of Options.MappedBudget; nil without one.
	stopBounding func()
}

// Options tune the bbolt file. Zero values take the defaults.
type Options struct {
	// OpenTimeout bounds the wait for bbolt's file lock, so a second process
	// never hangs on a database another process holds: after it, Open
	// fails with engine.ErrLocked. Default 1s.
	OpenTimeout time.Duration
	// ReadOnly opens an existing file without write access, under a shared
	// lock: a missing file is an error wrapping fs.ErrNotExist.
	ReadOnly bool
	// MaxBatchSize and MaxBatchDelay tune the group commit of Batch:
	// concurrent callers share one transaction and its fsyncs. A batch
	// commits when it holds MaxBatchSize calls or MaxBatchDelay after its
	// first call arrived, whichever comes first. bbolt's own defaults
	// (1000, 10ms) suit thousands of writers: with a few dozen, no batch
	// ever fills and every call waits the whole delay. Defaults 64 and 2ms.
	MaxBatchSize  int
	MaxBatchDelay time.Duration
	// NoSync skips the fsync of every commit: for a file nothing needs
	// after a crash (a snapshot being assembled, a measurement of growth).
	NoSync bool
	// MappedBudget, when positive, bounds how much of the mapped file stays
	// in the process's resident memory. bbolt reads through a map of the
	// whole file, so a command that reads all of it (check, backup, gc)
	// would otherwise end with the file's size resident. A watcher drops
	// the mapped pages from the process whenever its file-backed resident
	// memory passes the budget; they stay in the kernel's page cache, so a
	// page read again is a minor fault, not a disk read. 0: no bound, for
	// serve, which keeps its hot pages. Linux only; elsewhere no bound.
	MappedBudget int64
}

// Open opens (creating it unless opts.ReadOnly) the bbolt file at path.
func Open(path string, opts Options) (*Engine, error) {
	if opts.OpenTimeout <= 0 {
		opts.OpenTimeout = time.Second
	}
	if opts.MaxBatchSize <= 0 {
		opts.MaxBatchSize = 64
	}
	if opts.MaxBatchDelay <= 0 {
		opts.MaxBatchDelay = 2 * time.Millisecond
	}
	if err := checkLength(path); err != nil {
		return nil, err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: opts.OpenTimeout, ReadOnly: opts.ReadOnly})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, engine.ErrLocked
	}
	if errors.Is(err, bolt.ErrInvalid) || errors.Is(err, bolt.ErrChecksum) {
		return nil, fmt.Errorf("open store %s: %w (%v): %s", path, ErrDamaged, err, restoreAdvice)
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	db.MaxBatchSize = opts.MaxBatchSize
	db.MaxBatchDelay = opts.MaxBatchDelay
	db.NoSync = opts.NoSync
	e := &Engine{db: db}
	if opts.MappedBudget > 0 {
		e.stopBounding = boundMapped(e, opts.MappedBudget)
	}
	return e, nil
}

// ErrDamaged reports a store file that cannot be read as a bbolt file:
// empty, cut short of the pages its meta page counts, or with no valid
// meta page.
var ErrDamaged = errors.New("the file is damaged")

// restoreAdvice ends every ErrDamaged refusal: the file cannot be repaired
// in place, and the backup is what holds the instance.
const restoreAdvice = "restore the instance from a backup (sealbox restore BACKUP --data DIR, the README's \"Backups\")"

// Offsets in a bbolt meta page (go.etcd.io/bbolt/internal/common/meta.go),
// after the page header, in the host's byte order.
const (
	metaMagic     = 0xED0CDAED
	metaPageSize  = 8
	metaPgid      = 40
	metaTxid      = 48
	metaChecksum  = 56
	metaReadBytes = pageHeaderSize + metaChecksum + 8
)

// checkLength refuses a file shorter than the pages its newest valid meta
// page counts, before bbolt maps it: bbolt reads the file through a map,
// and a page past the end of a file cut short (a copy interrupted, a disk
// that filled) faults the process (SIGBUS) instead of returning an error.
// An empty file is refused too: bbolt would make a new, empty store of it,
// and the instance would start over without a word. A missing file is
// left to bbolt, which creates it; a file without a valid meta page too,
// which bbolt refuses as invalid.
func checkLength(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	if fi.Size() == 0 {
		return fmt.Errorf("open store %s: %w: it is empty (0 bytes). If the instance ever served, %s; a first start cut off before it wrote anything also leaves an empty file, which may then be removed", path, ErrDamaged, restoreAdvice)
	}
	var pages, txid uint64
	var size uint32
	for _, off := range []int64{0, -1} {
		if off < 0 {
			off = int64(cmp.Or(size, uint32(os.Getpagesize())))
		}
		b := make([]byte, metaReadBytes)
		if _, err := f.ReadAt(b, off); err != nil {
			continue
		}
		m := b[pageHeaderSize:]
		h := fnv.New64a()
		h.Write(m[:metaChecksum])
		if binary.NativeEndian.Uint32(m) != metaMagic || h.Sum64() != binary.NativeEndian.Uint64(m[metaChecksum:]) {
			continue
		}
		if t := binary.NativeEndian.Uint64(m[metaTxid:]); pages == 0 || t > txid {
			pages, txid, size = binary.NativeEndian.Uint64(m[metaPgid:]), t, binary.NativeEndian.Uint32(m[metaPageSize:])
		}
	}
	if need := pages * uint64(size); pages > 0 && uint64(fi.Size()) < need {
		return fmt.Errorf("open store %s: %w: it is %d bytes, but its pages reach %d: the file was cut short (a copy interrupted, a disk that filled). %s", path, ErrDamaged, fi.Size(), need, upperFirst(restoreAdvice))
	}
	return nil
}

// upperFirst is s with its first letter capitalised, to start a sentence.
func upperFirst(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

// OpenScratch opens a new bbolt file that nothing needs after a crash (a
// snapshot of another engine being assembled): its commits skip fsync,
// since the file is read back through the same handle and then removed.
func OpenScratch(path string) (engine.Engine, error) {
	return Open(path, Options{NoSync: true})
}

func (e *Engine) Update(fn func(engine.Tx) error) error {
	return e.db.Update(func(tx *bolt.Tx) error { return fn(boltTx{tx}) })
}

func (e *Engine) Batch(fn func(engine.Tx) error) error {
	return e.db.Batch(func(tx *bolt.Tx) error { return fn(boltTx{tx}) })
}

func (e *Engine) View(fn func(engine.Tx) error) error {
	return e.db.View(func(tx *bolt.Tx) error { return fn(boltTx{tx}) })
}

func (e *Engine) Buckets() (map[string]bool, error) {
	names := map[string]bool{}
	err := e.db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			names[string(name)] = true
			return nil
		})
	})
	return names, err
}

func (e *Engine) CreateBuckets(names [][]byte) error {
	return e.db.Update(func(tx *bolt.Tx) error {
		for _, name := range names {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		return nil
	})
}

func (e *Engine) Close() error {
	if e.stopBounding != nil {
		e.stopBounding()
	}
	return e.db.Close()
}

// Exclusive: bbolt's file lock keeps every other process out while this
// one has the file open for writing.
func (e *Engine) Exclusive() {}

// WriteSnapshot is bbolt's own hot backup: the one place that does I/O
// inside a transaction, which holds the pages it copies.
func (e *Engine) WriteSnapshot(w io.Writer) (int64, error) { return writeBoltSnapshot(e.db, w) }

// CheckPages checks the file's page structure as of one read
// transaction (checkPages), in memory of two bits per page.
func (e *Engine) CheckPages() ([]error, error) {
	var problems []error
	err := e.db.View(func(tx *bolt.Tx) (err error) {
		problems, err = checkPages(tx)
		return err
	})
	return problems, err
}

// Size is the file's size as the filesystem reports it, room bbolt
// allocated ahead included.
func (e *Engine) Size() (int64, error) {
	fi, err := os.Stat(e.db.Path())
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func writeBoltSnapshot(db *bolt.DB, w io.Writer) (int64, error) {
	var n int64
	err := db.View(func(tx *bolt.Tx) (err error) {
		n, err = tx.WriteTo(w)
		return err
	})
	return n, err
}

// CopyFile writes a consistent copy of the store file at path to w, as of
// one read transaction, whatever format the store is in: a restore copies a
// backup first and lets the store migrate the copy, so the backup itself is
// only read. The file is opened read-only under bbolt's shared lock, so a
// server writing to it makes this fail with engine.ErrLocked after timeout
// instead of copying a file mid-write.
func CopyFile(path string, w io.Writer, timeout time.Duration) (int64, error) {
	e, err := Open(path, Options{OpenTimeout: timeout, ReadOnly: true})
	if err != nil {
		return 0, err
	}
	defer e.Close()
	return writeBoltSnapshot(e.db, w)
}

type boltTx struct{ tx *bolt.Tx }

func (t boltTx) Bucket(name []byte) engine.Bucket {
	b := t.tx.Bucket(name)
	if b == nil {
		// Every bucket is created at Open: a missing one is a programming
		// error, reported as soon as it is used.
		return missingBucket{name}
	}
	return boltBucket{b}
}

type boltBucket struct{ b *bolt.Bucket }

func (b boltBucket) Get(key []byte) ([]byte, error) { return b.b.Get(key), nil }
func (b boltBucket) Put(key, value []byte) error    { return b.b.Put(key, value) }
func (b boltBucket) Delete(key []byte) error        { return b.b.Delete(key) }

func (b boltBucket) AppendOnly() { b.b.FillPercent = 1 }

func (b boltBucket) Scan(r engine.Range, fn func(k, v []byte) error) error {
	if err := engine.CheckRange(r); err != nil {
		return err
	}
	c := b.b.Cursor()
	var k, v []byte
	var next func() ([]byte, []byte)
	if r.Reverse {
		// bbolt's Last loops forever in a write transaction whose deletes
		// emptied every leaf page of the bucket (v1.5.0); First finds such a
		// bucket empty at once.
		if first, _ := c.First(); first == nil {
			return nil
		}
		if r.To == nil {
			k, v = c.Last()
		} else if k, v = c.Seek(r.To); k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		next = c.Prev
	} else {
		k, v = c.Seek(r.From)
		next = c.Next
	}
	for n := 0; k != nil && (r.Limit <= 0 || n < r.Limit); n++ {
		if r.Reverse && bytes.Compare(k, r.From) < 0 || !r.Reverse && r.To != nil && bytes.Compare(k, r.To) >= 0 {
			return nil
		}
		if err := fn(k, v); err != nil {
			if errors.Is(err, engine.ErrStopScan) {
				return nil
			}
			return err
		}
		k, v = next()
	}
	return nil
}

// missingBucket answers every call with the error of a bucket that does
// not exist.
type missingBucket struct{ name []byte }

func (m missingBucket) err() error { return fmt.Errorf("kv: bucket %s does not exist", m.name) }

func (m missingBucket) Get([]byte) ([]byte, error)                       { return nil, m.err() }
func (m missingBucket) Put(_, _ []byte) error                            { return m.err() }
func (m missingBucket) Delete([]byte) error                              { return m.err() }
func (m missingBucket) Scan(engine.Range, func(k, v []byte) error) error { return m.err() }
