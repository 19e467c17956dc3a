// Package engine is the seam between sealbox's records and the database
// that holds them: an ordered key-value store of named buckets with
// serializable transactions, and the optional abilities an engine may have.
// Every domain rule is written once, in package kv, against Engine and Tx;
// an engine package (kv/bolt, kv/postgres) only stores bytes and is the only
// one to import its database's driver. This package imports neither.
package engine

import "errors"

// Engine is an ordered key-value store of named buckets.
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
	// marks membership holds a non-empty value.
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

// ErrLocked reports that another process holds the database file.
var ErrLocked = errors.New("the database is in use by another process")

// CheckRange refuses an unbounded Range; every engine's Scan calls it
// first.
func CheckRange(r Range) error {
	if r.To == nil && r.Limit <= 0 {
		return ErrUnboundedScan
	}
	return nil
}
