package kv

import (
	"bytes"
	"errors"
	"io"
)

// Engine is the seam between sealbox's records and the database that holds
// them: an ordered key-value store of named buckets with serializable
// transactions. Every domain rule (each compare-and-set, validation and
// expiry) is written once, in this package, against Engine and Tx; an engine
// adapter only stores bytes. The bbolt adapter (bolt.go) is the default and
// the only file of kv that imports bbolt.
type Engine interface {
	// Update runs fn in a serializable read-write transaction and commits
	// it when fn returns nil. fn may run more than once (an engine retries
	// a transaction that lost a conflict), so it must set its results
	// afresh on every run.
	Update(fn func(Tx) error) error
	// Batch is Update for many concurrent callers: an engine may run
	// several callers' functions in one transaction and commit them
	// together. A function may run more than once, and an error from one
	// function must not be left half-applied (the engine re-runs the others
	// without it).
	Batch(fn func(Tx) error) error
	// View runs fn in a read-only transaction that sees one consistent
	// state of the store.
	View(fn func(Tx) error) error
	// Buckets names the buckets that exist.
	Buckets() (map[string]bool, error)
	// CreateBuckets creates every named bucket that does not exist yet.
	CreateBuckets(names [][]byte) error
	// Close releases the engine; transactions under way finish first.
	Close() error
}

// Tx is one transaction of an Engine. Its buckets, and the byte slices
// they return, are valid only until the transaction ends.
type Tx interface {
	// Bucket is the named bucket, which must exist (the store creates every
	// bucket it uses when it opens).
	Bucket(name []byte) Bucket
}

// Bucket is an ordered map of byte keys to byte values inside one
// transaction.
type Bucket interface {
	// Get returns the value under key, or nil when there is none. A value
	// stored empty may read back as nil or empty, so a key that only
	// marks membership holds `member`.
	Get(key []byte) ([]byte, error)
	// Put stores value under key, replacing any value there.
	Put(key, value []byte) error
	// Delete removes key; deleting a missing key is not an error.
	Delete(key []byte) error
	// Scan calls fn with the pairs of r in key order (descending when
	// r.Reverse) and stops at fn's first error, which it returns; a
	// non-nil ErrStopScan from fn ends the scan without error. Every scan
	// is bounded: a Range with neither an upper bound nor a limit is
	// refused (ErrUnboundedScan). fn must not write to the bucket it scans.
	Scan(r Range, fn func(k, v []byte) error) error
}

// Range selects the keys k with From <= k < To. A nil From starts at the
// first key; a nil To has no upper bound, and then Limit must be set.
type Range struct {
	From, To []byte
	// Limit is the most pairs the scan visits; 0 is no limit.
	Limit int
	// Reverse visits the keys in descending order, from the last key below
	// To.
	Reverse bool
}

// ErrStopScan, returned by a Scan function, ends the scan early without an
// error.
var ErrStopScan = errors.New("kv: stop scan")

// ErrUnboundedScan is a Range with neither an upper bound nor a limit: a
// scan that could read a whole bucket on a request path.
var ErrUnboundedScan = errors.New("kv: a scan needs an upper bound or a limit")

// checkRange refuses an unbounded Range; every adapter calls it first.
func checkRange(r Range) error {
	if r.To == nil && r.Limit <= 0 {
		return ErrUnboundedScan
	}
	return nil
}

// prefixRange selects every key that starts with prefix.
func prefixRange(prefix []byte) Range { return Range{From: prefix, To: prefixEnd(prefix)} }

// prefixEnd is the least key greater than every key starting with prefix.
// A prefix of only 0xff bytes has none: its range is bounded by a limit of
// every key from the prefix on, which is what such a prefix means.
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// scanPrefix calls fn with every key of b that starts with prefix, and its
// value, in key order, and stops at fn's first error, which it returns. It
// is the one way a record's index is read: a bounded scan, never the whole
// bucket. fn must not write to b; k and v are valid only during the call.
func scanPrefix(b Bucket, prefix []byte, fn func(k, v []byte) error) error {
	r := prefixRange(prefix)
	if r.To == nil {
		r.Limit = maxPrefixScan
	}
	return b.Scan(r, fn)
}

// maxPrefixScan bounds a scan of a prefix that has no upper key (all 0xff
// bytes, which no sealbox key starts with).
const maxPrefixScan = 1 << 20

// prefixKeys returns a copy of every key of b that starts with prefix, so a
// caller may delete them after the scan (never while it runs).
func prefixKeys(b Bucket, prefix []byte) ([][]byte, error) {
	var keys [][]byte
	err := scanPrefix(b, prefix, func(k, _ []byte) error {
		keys = append(keys, bytes.Clone(k))
		return nil
	})
	return keys, err
}

// deletePrefix deletes every key of b that starts with prefix.
func deletePrefix(b Bucket, prefix []byte) error {
	keys, err := prefixKeys(b, prefix)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// pageAfter selects up to limit keys that sort after after ("" to start at
// the first key): one page of a listing that resumes where the last ended.
func pageAfter(after string, limit int) Range {
	r := Range{Limit: limit}
	if after != "" {
		r.From = append([]byte(after), 0)
	}
	return r
}

// scanPages calls fn with every pair of b in key order, reading pageSize
// pairs per scan, until fn returns an error or ErrStopScan: the
// whole-bucket walk of the operator's tools (listings, checks, migrations),
// which never run on a request path.
func scanPages(b Bucket, fn func(k, v []byte) error) error {
	const pageSize = 1000
	var from []byte
	for {
		n, stopped := 0, false
		var last []byte
		err := b.Scan(Range{From: from, Limit: pageSize}, func(k, v []byte) error {
			if n++; n == pageSize {
				last = bytes.Clone(k)
			}
			err := fn(k, v)
			stopped = errors.Is(err, ErrStopScan)
			return err
		})
		if err != nil || stopped || n < pageSize {
			return err
		}
		from = append(last, 0)
	}
}

// clearBucket deletes every key of b, a page at a time.
func clearBucket(b Bucket) error {
	for {
		var keys [][]byte
		err := b.Scan(Range{Limit: 1000}, func(k, _ []byte) error {
			keys = append(keys, bytes.Clone(k))
			return nil
		})
		if err != nil || len(keys) == 0 {
			return err
		}
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
	}
}

// lastKey returns a copy of the greatest key of b, or nil when b is empty.
func lastKey(b Bucket) ([]byte, error) {
	var last []byte
	err := b.Scan(Range{Limit: 1, Reverse: true}, func(k, _ []byte) error {
		last = bytes.Clone(k)
		return nil
	})
	return last, err
}

// appendOnlyBucket is the optional part of a Bucket that can be told that
// keys only ever go at its end, so the engine fills its pages instead of
// leaving room for inserts that never come (bbolt's FillPercent).
type appendOnlyBucket interface{ appendOnly() }

// Snapshotter is the optional part of an Engine that lives in one file: a
// hot copy of the whole store and a check of the file's own structure. Only
// bbolt has it; a database server has its own tools (pg_dump, amcheck).
type Snapshotter interface {
	// WriteSnapshot writes a consistent copy of the store to w, as of one
	// read transaction.
	WriteSnapshot(w io.Writer) (int64, error)
	// CheckPages checks the file's page structure and returns every
	// problem it finds.
	CheckPages() ([]error, error)
	// Size is the file's size in bytes.
	Size() (int64, error)
}

// ErrNoSnapshot reports an engine that has no Snapshotter.
var ErrNoSnapshot = errors.New("kv: this store engine has no file to snapshot or check")

// StatsEngine is the optional part of an Engine that runs over a connection
// pool to a database server (PostgreSQL): what the server's metrics show of
// it. bbolt has none.
type StatsEngine interface {
	// Stats is a snapshot of the engine's figures; it never blocks on a
	// transaction.
	Stats() EngineStats
}

// EngineStats are an engine's connection pool and its conflict retries.
type EngineStats struct {
	// AcquiredConns are in use by a transaction, IdleConns open and free,
	// TotalConns both (and those being opened), MaxConns the pool's bound.
	AcquiredConns, IdleConns, TotalConns, MaxConns int32
	// TxRetries counts the runs of transactions that lost a serialization
	// conflict or a deadlock (40001, 40P01) since the engine opened: each
	// is rolled back and run again.
	TxRetries uint64
	// RoundTrips counts the exchanges with the database server the
	// engine's transactions made, Reads those that were reads (a Get or a
	// Scan; the first of a transaction carries its BEGIN): the difference
	// is what writing and committing cost beyond the reads.
	RoundTrips, Reads uint64
}

// EngineStats reads the engine's figures, when it has them (PostgreSQL):
// false for bbolt.
func (s *Store) EngineStats() (EngineStats, bool) {
	se, ok := s.engine.(StatsEngine)
	if !ok {
		return EngineStats{}, false
	}
	return se.Stats(), true
}
