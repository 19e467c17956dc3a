// Package ratelimit limits requests per key, such as a client address, with a
// token bucket per key in bounded memory.
package ratelimit

import (
	"fmt"
	"math"
	"sync"
	"time"

	"sealbox/kv/lru"
)

// maxKeys is the most keys a Limiter tracks at once: about 16 MB of buckets
// when the keys are IPv6 addresses.
const maxKeys = 100_000

// Limiter is a token bucket per key: a key may spend up to burst requests at once,
// and earns them back at rate per second. It is safe for concurrent use.
//
// Memory is bounded. A bucket that would be full again is forgotten, which
// changes nothing, because an unknown key starts with a full bucket; so after
// each call the Limiter holds only keys used within the last burst/rate seconds.
// Beyond maxKeys of those, the least recently used key is forgotten, which gives
// that key a full burst again when it returns. Under an address spray the
// Limiter thus errs towards admitting a forgotten client rather than refusing
// new ones: an attacker with more addresses than maxKeys escapes the limit
// either way, and refusing unknown keys would lock out every legitimate
// newcomer.
//
// Each bucket is kept as the generic cell rate algorithm's theoretical arrival
// time (tat), which is equivalent to counting tokens but uses only integer
// durations, so retry times are exact.
type Limiter struct {
	interval  time.Duration // time to earn one token back: 1/rate
	tolerance time.Duration // (burst-1)*interval: how far a key's tat may run ahead of now
	now       func() time.Time
	epoch     time.Time // times are kept as durations since epoch

	mu sync.Mutex
	// buckets is in order of last use, so eviction looks only at the
	// buckets it removes and at one more.
	buckets lru.List[string, *bucket]
}

type bucket struct {
	// tat is when, measured from the Limiter's epoch, the bucket will have
	// earned back the token spent last; it is full once tat <= now, and holds
	// burst - (tat-now)/interval tokens before.
	tat time.Duration
}

// New returns a Limiter allowing each key burst requests at once and rate
// requests per second after that. now is the clock, time.Now outside tests; it
// must not go backwards. rate is kept as a whole number of nanoseconds per
// token. New panics if rate is not positive and finite, if burst is less than 1,
// or if burst/rate is over 100 years, which keeps all arithmetic on times far
// from overflow.
func New(rate float64, burst int, now func() time.Time) *Limiter {
	if !(rate > 0) || math.IsInf(rate, 0) || burst < 1 {
		panic(fmt.Sprintf("ratelimit: invalid rate %v or burst %d", rate, burst))
	}
	interval := float64(time.Second) / rate
	if interval*float64(burst) > float64(100*365*24*time.Hour) {
		panic(fmt.Sprintf("ratelimit: burst %d at rate %v spans too long", burst, rate))
	}
	iv := max(time.Duration(math.Round(interval)), 1)
	return &Limiter{
		interval:  iv,
		tolerance: time.Duration(burst-1) * iv,
		now:       now,
		epoch:     now(),
	}
}

// Allow spends one of key's tokens and reports whether there was one. When there
// was not, retryAfter is how long until the next token is earned: a request
// then will be allowed unless another one spends the token first. Rounding it up
// to whole seconds for a Retry-After header is the caller's job.
func (l *Limiter) Allow(key string) (ok bool, retryAfter time.Duration) {
	// Read outside the lock to keep it short. A caller overtaken by one that read
	// a later time is judged at its own earlier time, which is only stricter.
	now := l.now().Sub(l.epoch)
	l.mu.Lock()
	defer l.mu.Unlock()

	b, ok := l.buckets.Use(key)
	if !ok {
		if l.buckets.Len() >= maxKeys {
			oldest, _, _ := l.buckets.Oldest()
			l.buckets.Remove(oldest)
		}
		b = &bucket{tat: now}
		l.buckets.Put(key, b)
	}

	tat := max(b.tat, now)
	if wait := tat - now - l.tolerance; wait > 0 {
		ok, retryAfter = false, wait
	} else {
		b.tat = tat + l.interval
		ok = true
	}
	// b is not full now (its tat is after now), so this stops at b at the latest.
	l.evictFull(now)
	return ok, retryAfter
}

// Refund gives back a token Allow spent on key, for a request that turned
// out not to be what the limit counts (a correct sign-in). A bucket
// forgotten meanwhile was full, and stays so.
func (l *Limiter) Refund(key string) {
	now := l.now().Sub(l.epoch)
	l.mu.Lock()
	defer l.mu.Unlock()
	if b, ok := l.buckets.Use(key); ok {
		b.tat = max(b.tat-l.interval, now)
	}
	l.evictFull(now)
}

// evictFull forgets the least recently used buckets while they are full again.
// Every bucket is full at most burst intervals after its last use, so after this
// no bucket older than that remains.
func (l *Limiter) evictFull(now time.Duration) {
	for {
		key, b, ok := l.buckets.Oldest()
		if !ok || b.tat > now {
			return
		}
		l.buckets.Remove(key)
	}
}
