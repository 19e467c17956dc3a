package kv

import (
	"sync"
	"sync/atomic"
)

// maxCachedReads bounds a readCache; a full cache starts again empty.
const maxCachedReads = 1 << 14

// readCache remembers the results of the store's hottest reads (a session by
// its access token, a blob by share link, an account by id) between writes. Every write
// transaction, whatever it touched, makes every entry stale: its commit
// moves writeGen on, and an entry counts only while writeGen still has the
// value read before the read that filled it. So a cached answer is never
// older than the last commit, and a revocation is refused from the moment
// it commits, as without the cache.
//
// This holds only while every write goes through this Store, which is so
// on an engine one process holds alone (engine.Exclusive: bbolt's file
// lock). On an engine other processes write (PostgreSQL, with several
// nodes) the store has no caches (nil).
type readCache[V any] struct {
	mu      sync.RWMutex
	entries map[string]cachedRead[V]
}

type cachedRead[V any] struct {
	gen   uint64
	value V
}

// writeGen counts committed (or attempted) write transactions.
type writeGen struct{ n atomic.Uint64 }

// cached returns the value under key if it was read since the last write,
// else the result of read, which it keeps when read reports it found
// something. read must be a pure read of the store. Nothing is kept for a
// miss or a failed read: anyone can send unknown tokens and link ids, and
// they must not be able to push the live entries out. A nil c caches
// nothing.
func cached[V any](s *Store, c *readCache[V], key string, read func() (V, bool, error)) (V, error) {
	if c == nil {
		v, _, err := read()
		return v, err
	}
	gen := s.writes.n.Load()
	c.mu.RLock()
	e, ok := c.entries[key]
	c.mu.RUnlock()
	if ok && e.gen == gen {
		return e.value, nil
	}
	v, found, err := read()
	if err != nil || !found {
		return v, err
	}
	c.mu.Lock()
	if c.entries == nil || len(c.entries) >= maxCachedReads {
		c.entries = make(map[string]cachedRead[V])
	}
	c.entries[key] = cachedRead[V]{gen: gen, value: v}
	c.mu.Unlock()
	return v, nil
}

// wrote marks the end of a write transaction, committed or not: every
// cached read is stale from now on. It runs after the commit, so a read
// that began before the commit (and may have seen the old state) carries
// an older generation.
func (s *Store) wrote() { s.writes.n.Add(1) }
