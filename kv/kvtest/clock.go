package kvtest

import (
	"sync"
	"time"
)

// Clock is the test clock: it stands still until a test moves it, so no
// test sleeps for an expiry. It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock at 2026-11-22 10:00 UTC.
func NewClock() *Clock {
	return NewClockAt(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
}

// NewClockAt returns a clock at t.
func NewClockAt(t time.Time) *Clock { return &Clock{now: t} }

// Now is the clock's time; pass it as a kv.Options or server.Config Now.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
