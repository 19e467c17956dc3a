package kv

import (
	"bytes"
	"errors"

	"sealbox/kv/engine"
)

// The store is written against kv/engine's ordered key-value seam; these
// names keep the domain files' vocabulary short. An engine package (kv/bolt,
// kv/postgres) implements it, and only cli picks one.
type (
	// Engine is the database under a Store (engine.Engine).
	Engine = engine.Engine
	// Tx is one transaction of an Engine (engine.Tx).
	Tx = engine.Tx
	// Bucket is an ordered map inside one transaction (engine.Bucket).
	Bucket = engine.Bucket
	// Range selects the keys a Scan visits (engine.Range).
	Range = engine.Range
)

// ErrStopScan, returned by a Scan function, ends the scan early without an
// error.
var ErrStopScan = engine.ErrStopScan

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

// ErrNoSnapshot reports an engine that has no engine.Snapshotter.
var ErrNoSnapshot = errors.New("kv: this store engine has no file to snapshot or check")

// EngineStats are an engine's connection pool and its conflict retries
// (engine.Stats).
type EngineStats = engine.Stats

// EngineStats reads the engine's figures, when it has them (PostgreSQL):
// false for bbolt.
func (s *Store) EngineStats() (EngineStats, bool) {
	se, ok := s.engine.(engine.StatsReporter)
	if !ok {
		return EngineStats{}, false
	}
	return se.Stats(), true
}
