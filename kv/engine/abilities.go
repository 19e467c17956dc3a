package engine

import "io"

// The optional abilities of an engine or a bucket: each a small interface
// that the domain asks for once, with a type assertion, and builds its
// strategy on (tusd's As… shape), so no domain code names an engine.

// Exclusive is an engine no other process writes while this one holds it
// (bbolt's file lock): every write goes through this process, so it may
// cache reads between its own writes and keep its verifications in flight
// in memory, and whatever a past process left in flight is gone.
type Exclusive interface {
	// Exclusive marks the ability; it does nothing.
	Exclusive()
}

// AppendOnly is a Bucket that can be told that keys only ever go at its
// end, so the engine fills its pages instead of leaving room for inserts
// that never come (bbolt's FillPercent).
type AppendOnly interface {
	// AppendOnly tells the bucket, for the rest of the transaction.
	AppendOnly()
}

// Snapshotter is an engine that lives in one file: a hot copy of the whole
// store and a check of the file's own structure. A database server has its
// own tools instead (pg_dump, amcheck).
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

// StatsReporter is an engine that runs over a connection pool to a
// database server (PostgreSQL): what the server's metrics show of it.
type StatsReporter interface {
	// Stats is a snapshot of the engine's figures; it never blocks on a
	// transaction.
	Stats() Stats
}

// Stats are an engine's connection pool and its conflict retries.
type Stats struct {
	// AcquiredConns are in use by a transaction, IdleConns open and free,
	// TotalConns both (and those being opened), MaxConns the pool's bound.
	AcquiredConns, IdleConns, TotalConns, MaxConns int32
	// TxRetries counts the runs of transactions that lost a serialization
	// conflict or a deadlock (40001, 40P01) since the engine opened: each
	// is rolled back and run again.
	TxRetries uint64
	// RoundTrips counts the exchanges with the database server the
	// engine's transactions made, Reads those that were reads (a Get, a
	// Scan or a Prefetch; the first of a transaction carries its BEGIN): the difference
	// is what writing and committing cost beyond the reads.
	RoundTrips, Reads uint64
	// Conflicts counts the TxRetries by the statement that lost: "read
	// <bucket>", "write <bucket>" or "delete <bucket>" for a statement on
	// one bucket's table, "commit" for a conflict found only when the
	// transaction committed (a serializable transaction whose reads another
	// committed transaction's writes changed), "begin" for the opening.
	// Where the conflicts fall shows which rows the writers fight over.
	Conflicts map[string]uint64
}

// Prefetcher is a Tx whose reads each cost an exchange with a database
// server (PostgreSQL): it reads many keys, of any buckets, in one. A
// transaction that knows the keys it is about to Get asks for them first,
// and each Get of them then costs nothing more. An engine that reads its
// own file (bbolt) has no use for it.
type Prefetcher interface {
	// Prefetch reads keys in one exchange; a key the transaction has
	// already read or written is not read again. It changes nothing a Get
	// answers: only what the Get costs.
	Prefetch(keys []Key) error
}

// BatchReader is an Engine whose Batch reads its callers' keys together: a
// caller names the keys its function will read, and the batch reads those
// of all its callers in one exchange (Prefetcher) before it runs their
// functions one after another, instead of each function waiting for its
// own.
type BatchReader interface {
	// BatchReading is Batch for a function that will read keys.
	BatchReading(keys []Key, fn func(Tx) error) error
}

// Key names one key of one bucket.
type Key struct {
	Bucket, Key []byte
}

// StatementReader is an Engine whose reads each cost an exchange with a
// database server (PostgreSQL) that can answer a read of one record, or of
// an index's key and the record it names, with one statement outside any
// transaction: a single statement reads one snapshot and commits itself, so
// the read costs one exchange, with no BEGIN before it and no COMMIT after.
// A request that reads one record (its access token's session, an account)
// then waits for that exchange alone.
type StatementReader interface {
	// ReadOne returns bucket's value under key, nil when there is none.
	// The slice is the caller's.
	ReadOne(bucket, key []byte) ([]byte, error)
	// Follow returns the value of target under the key that is index's
	// value under key, both read as of one state of the store; nil when
	// either has none. The slice is the caller's.
	Follow(index, key, target []byte) ([]byte, error)
	// FollowBeside is Follow that also reads the record beside names, all
	// with one statement as of one state of the store: a request that needs
	// a record it can name before reading (the caller's own account, named
	// by its access token) waits for that one exchange alone. followed and
	// other are nil when there is none; the slices are the caller's.
	FollowBeside(index, key, target []byte, beside Key) (followed, other []byte, err error)
}
