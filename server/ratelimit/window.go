package ratelimit

import (
	"sync"
	"time"

	"sealbox/kv/lru"
)

// Window allows each key at most limit events within any span of time (a
// sliding window), such as refused redemptions per client address. Unlike
// Limiter, which spends a token on every request, a Window is told which
// events count: Spend books one in advance and Refund takes it back when the
// request turns out not to count. Booking before the work, not after, means
// parallel requests cannot overrun the limit while they run.
//
// Memory is bounded: a key holds at most limit event times, and beyond
// maxKeys keys the key whose latest event is oldest is forgotten (a key whose
// events have all left the window is forgotten first, which changes
// nothing). As with Limiter, an address spray beyond maxKeys errs towards
// admitting a forgotten key rather than refusing newcomers.
type Window struct {
	limit int
	span  time.Duration
	now   func() time.Time

	mu sync.Mutex
	// keys is in the order of each key's latest event.
	keys lru.List[string, *windowKey]
}

type windowKey struct {
	events []time.Time // ascending, within the span, at most limit
}

// NewWindow returns a Window of limit events per span per key; now is the
// clock and must not go backwards. It panics if limit < 1 or span <= 0.
func NewWindow(limit int, span time.Duration, now func() time.Time) *Window {
	if limit < 1 || span <= 0 {
		panic("ratelimit: invalid window")
	}
	return &Window{limit: limit, span: span, now: now}
}

// Spend books one event for key at the current time and returns that time,
// unless key already has limit events within the span: then ok is false and
// retryAfter is how long until the oldest of them leaves the window.
func (w *Window) Spend(key string) (at time.Time, retryAfter time.Duration, ok bool) {
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.forgetIdle(now)
	k, ok := w.keys.Get(key)
	if !ok {
		if w.keys.Len() >= maxKeys {
			oldest, _, _ := w.keys.Oldest()
			w.keys.Remove(oldest)
		}
		k = &windowKey{}
	}
	k.events = pruned(k.events, now.Add(-w.span))
	if len(k.events) >= w.limit {
		return time.Time{}, k.events[0].Add(w.span).Sub(now), false
	}
	k.events = append(k.events, now)
	w.keys.Put(key, k)
	return now, 0, true
}

// Refund removes the event Spend booked at at for key, when it is still held.
func (w *Window) Refund(key string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	k, ok := w.keys.Get(key)
	if !ok {
		return
	}
	for i, t := range k.events {
		if t.Equal(at) {
			k.events = append(k.events[:i], k.events[i+1:]...)
			break
		}
	}
	if len(k.events) == 0 {
		w.keys.Remove(key)
	}
}

// pruned drops the events at or before cutoff.
func pruned(events []time.Time, cutoff time.Time) []time.Time {
	i := 0
	for i < len(events) && !events[i].After(cutoff) {
		i++
	}
	return events[i:]
}

// forgetIdle forgets keys whose latest event has left the window; the keys
// are ordered by latest event, so it stops at the first key still in use.
func (w *Window) forgetIdle(now time.Time) {
	cutoff := now.Add(-w.span)
	for {
		key, k, ok := w.keys.Oldest()
		if !ok || len(k.events) > 0 && k.events[len(k.events)-1].After(cutoff) {
			return
		}
		w.keys.Remove(key)
	}
}
