package ratelimit

import (
	"math"
	"sealbox/kv/kvtest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// allowN calls Allow n times and fails unless every call is allowed.
func allowN(t *testing.T, l *Limiter, key string, n int) {
	t.Helper()
	for i := range n {
		if ok, retry := l.Allow(key); !ok {
			t.Fatalf("%s: call %d of %d refused, retry after %v", key, i+1, n, retry)
		}
	}
}

// wantRefused fails unless Allow refuses key with exactly retryAfter.
func wantRefused(t *testing.T, l *Limiter, key string, retryAfter time.Duration) {
	t.Helper()
	ok, got := l.Allow(key)
	if ok {
		t.Fatalf("%s: allowed, want refused", key)
	}
	if got != retryAfter {
		t.Fatalf("%s: retryAfter: got %v, want %v", key, got, retryAfter)
	}
}

// drainedLimiter is a limiter of 20 a second with a burst of 200 whose key
// "a" has just spent the whole burst.
func drainedLimiter(t *testing.T) (*kvtest.Clock, *Limiter) {
	c := kvtest.NewClock()
	l := New(20, 200, c.Now)
	allowN(t, l, "a", 200)
	return c, l
}

func TestBurstThenRefusal(t *testing.T) {
	c, l := drainedLimiter(t)
	wantRefused(t, l, "a", 50*time.Millisecond)
	c.Advance(20 * time.Millisecond)
	wantRefused(t, l, "a", 30*time.Millisecond)
}

func TestRefill(t *testing.T) {
	c, l := drainedLimiter(t)

	// After exactly retryAfter, one token and no more.
	_, retry := l.Allow("a")
	c.Advance(retry)
	allowN(t, l, "a", 1)
	wantRefused(t, l, "a", 50*time.Millisecond)

	// 1s earns 20 tokens.
	c.Advance(time.Second)
	allowN(t, l, "a", 20)
	wantRefused(t, l, "a", 50*time.Millisecond)

	// A long rest fills the bucket to burst, not beyond.
	c.Advance(time.Hour)
	allowN(t, l, "a", 200)
	wantRefused(t, l, "a", 50*time.Millisecond)
}

// TestRefund: a refunded token can be spent again, a bucket is never filled
// beyond its burst by refunds, and a refund to a key never seen is a no-op.
func TestRefund(t *testing.T) {
	_, l := drainedLimiter(t)
	l.Refund("a")
	allowN(t, l, "a", 1)
	wantRefused(t, l, "a", 50*time.Millisecond)

	for range 5 {
		l.Refund("b")
	}
	allowN(t, l, "b", 200)
	wantRefused(t, l, "b", 50*time.Millisecond)

	c := kvtest.NewClock()
	l = New(1, 2, c.Now)
	allowN(t, l, "c", 2)
	for range 10 {
		l.Refund("c")
	}
	allowN(t, l, "c", 2)
	wantRefused(t, l, "c", time.Second)
}

func TestSlowRate(t *testing.T) {
	c := kvtest.NewClock()
	l := New(0.5, 1, c.Now)
	allowN(t, l, "a", 1)
	wantRefused(t, l, "a", 2*time.Second)
	c.Advance(1500 * time.Millisecond)
	wantRefused(t, l, "a", 500*time.Millisecond)
	c.Advance(500 * time.Millisecond)
	allowN(t, l, "a", 1)
}

func TestIndependentKeys(t *testing.T) {
	c := kvtest.NewClock()
	l := New(1, 3, c.Now)
	allowN(t, l, "a", 3)
	wantRefused(t, l, "a", time.Second)
	allowN(t, l, "b", 3)
	wantRefused(t, l, "b", time.Second)
	wantRefused(t, l, "a", time.Second)
}

// TestEvictionAtCap sends 1,000,000 distinct keys at one instant, so no bucket
// refills and only the cap bounds the map.
func TestEvictionAtCap(t *testing.T) {
	c := kvtest.NewClock()
	l := New(1, 1, c.Now)
	const n = 1_000_000
	for i := range n {
		if ok, _ := l.Allow(strconv.Itoa(i)); !ok {
			t.Fatalf("new key %d refused", i)
		}
		if l.buckets.Len() > maxKeys {
			t.Fatalf("after %d keys: %d buckets, cap %d", i+1, l.buckets.Len(), maxKeys)
		}
	}
	if got, want := l.buckets.Len(), maxKeys; got != want {
		t.Errorf("buckets: got %d, want %d", got, want)
	}
	// The most recent keys are still limited; the oldest were forgotten and
	// start with a full bucket.
	wantRefused(t, l, strconv.Itoa(n-1), time.Second)
	allowN(t, l, "0", 1)
}

// TestEvictionOfFullBuckets sends a new key every millisecond: a bucket that
// spent one token is full again 50ms later and is forgotten.
func TestEvictionOfFullBuckets(t *testing.T) {
	c := kvtest.NewClock()
	l := New(20, 200, c.Now)
	for i := range 100_000 {
		if ok, _ := l.Allow(strconv.Itoa(i)); !ok {
			t.Fatalf("new key %d refused", i)
		}
		if l.buckets.Len() > 50 {
			t.Fatalf("after %d keys: %d buckets, want at most 50", i+1, l.buckets.Len())
		}
		c.Advance(time.Millisecond)
	}

	// A key that used its whole burst stays until it is full again: 10s.
	allowN(t, l, "heavy", 200)
	for range 9_999 {
		c.Advance(time.Millisecond)
		l.Allow("other")
	}
	if _, ok := l.buckets.Get("heavy"); !ok {
		t.Fatal("heavy forgotten before its bucket refilled")
	}
	c.Advance(time.Millisecond)
	l.Allow("other")
	if _, ok := l.buckets.Get("heavy"); ok {
		t.Fatal("heavy kept after its bucket refilled")
	}
}

func TestConcurrent(t *testing.T) {
	c := kvtest.NewClock()
	l := New(10, 100, c.Now)
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				if ok, _ := l.Allow("shared"); ok {
					allowed.Add(1)
				}
				l.Allow(strconv.Itoa(g*1000 + i))
				if i%100 == 0 {
					c.Advance(time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	// 100 at once, plus one per 100ms of the 80ms the clock moved: none.
	if got, want := allowed.Load(), int64(100); got != want {
		t.Errorf("shared key allowed %d times, want %d", got, want)
	}
}

func TestNewPanics(t *testing.T) {
	for _, tt := range []struct {
		rate  float64
		burst int
	}{
		{0, 1}, {-1, 1}, {1, 0}, {math.NaN(), 1}, {math.Inf(1), 1}, {1e-10, 1000},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%v, %d) did not panic", tt.rate, tt.burst)
				}
			}()
			New(tt.rate, tt.burst, time.Now)
		}()
	}
}

func BenchmarkAllowParallel(b *testing.B) {
	l := New(20, 200, time.Now)
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = "192.0.2." + strconv.Itoa(i)
	}
	var seed atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		i := int(seed.Add(7919))
		for pb.Next() {
			l.Allow(keys[i%len(keys)])
			i++
		}
	})
}
