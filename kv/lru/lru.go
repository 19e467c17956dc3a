// Package lru keeps keyed values in the order of their last use, so a
// bounded table can forget the one used least recently. It is the one such
// order of the module: the rate limiters' per-address tables
// (server/ratelimit) and the blob store's idle read handles (blobs) use it.
// It sits under kv, the lowest layer of the fixed top level, as the error
// catalog does; it imports nothing of the project.
package lru

// List maps keys to values and orders them by last use: Put and Use make a
// key the most recent; Get, Remove and Oldest leave the order alone. The
// zero List is empty and ready. A List is not safe for concurrent use: its
// users hold their own lock around it. Every operation takes constant time.
type List[K comparable, V any] struct {
	entries        map[K]*entry[K, V]
	newest, oldest *entry[K, V]
}

type entry[K comparable, V any] struct {
	key          K
	value        V
	newer, older *entry[K, V]
}

// Len is the number of keys held.
func (l *List[K, V]) Len() int { return len(l.entries) }

// Get returns key's value, without counting it as a use.
func (l *List[K, V]) Get(key K) (V, bool) { return l.entries[key].get() }

// Use returns key's value and makes key the most recently used.
func (l *List[K, V]) Use(key K) (V, bool) {
	e := l.entries[key]
	if e != nil {
		l.unlink(e)
		l.pushNewest(e)
	}
	return e.get()
}

// Put sets key's value and makes key the most recently used.
func (l *List[K, V]) Put(key K, value V) {
	if e, ok := l.entries[key]; ok {
		e.value = value
		l.unlink(e)
		l.pushNewest(e)
		return
	}
	if l.entries == nil {
		l.entries = make(map[K]*entry[K, V])
	}
	e := &entry[K, V]{key: key, value: value}
	l.entries[key] = e
	l.pushNewest(e)
}

// Remove forgets key and returns the value it had.
func (l *List[K, V]) Remove(key K) (V, bool) {
	e := l.entries[key]
	if e != nil {
		l.unlink(e)
		delete(l.entries, key)
	}
	return e.get()
}

// Oldest returns the least recently used key and its value; ok is false
// when the List is empty.
func (l *List[K, V]) Oldest() (key K, value V, ok bool) {
	if l.oldest == nil {
		return key, value, false
	}
	return l.oldest.key, l.oldest.value, true
}

// get is the value of e, which is nil for a key not held.
func (e *entry[K, V]) get() (V, bool) {
	if e == nil {
		var zero V
		return zero, false
	}
	return e.value, true
}

func (l *List[K, V]) pushNewest(e *entry[K, V]) {
	e.older = l.newest
	if l.newest != nil {
		l.newest.newer = e
	} else {
		l.oldest = e
	}
	l.newest = e
}

func (l *List[K, V]) unlink(e *entry[K, V]) {
	if e.newer != nil {
		e.newer.older = e.older
	} else {
		l.newest = e.older
	}
	if e.older != nil {
		e.older.newer = e.newer
	} else {
		l.oldest = e.newer
	}
	e.newer, e.older = nil, nil
}
