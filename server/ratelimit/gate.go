package ratelimit

import (
	"context"
	"sync"
	"time"
)

// Gate is where password verifications wait to be admitted. Admission
// itself is the store's (kv.Store.EnterPasswordAttempt): the failures it
// has counted plus the verifications in flight on every node must stay
// under the lockout limit, so parallel guesses cannot pass the limit while
// their argon2id runs, on one node or many. What the gate adds is the
// waiting: parallel correct sign-ins of one account wait their turn (a few
// milliseconds) instead of being refused. A waiter tries again at once
// when a verification ends on this node (Left), and otherwise polls with a
// growing pause, which is how it learns of verifications ending on other
// nodes.
type Gate struct {
	mu sync.Mutex
	// released is closed, and replaced, whenever a verification ends here.
	released chan struct{}
	// minPoll and maxPoll bound the pause between two tries.
	minPoll, maxPoll time.Duration
}

// Default pauses between two tries of a waiter that no local leave woke:
// the first after DefaultMinPoll, each next one twice as long, up to
// DefaultMaxPoll.
const (
	DefaultMinPoll = 5 * time.Millisecond
	DefaultMaxPoll = 100 * time.Millisecond
)

// NewGate returns a gate whose waiters poll between minPoll and maxPoll
// (DefaultMinPoll and DefaultMaxPoll when zero).
func NewGate(minPoll, maxPoll time.Duration) *Gate {
	if minPoll <= 0 {
		minPoll = DefaultMinPoll
	}
	if maxPoll < minPoll {
		maxPoll = max(DefaultMaxPoll, minPoll)
	}
	return &Gate{released: make(chan struct{}), minPoll: minPoll, maxPoll: maxPoll}
}

// Enter waits until try admits a verification: try reports whether it was
// admitted (and recorded it), or an error, which Enter returns as it is (a
// refusal such as a locked address). Between tries Enter waits for a
// verification to end on this node, a poll pause, or ctx's end, whose error
// it then returns. A caller that was admitted ends its verification, after
// counting a failure, then calls Left.
func (g *Gate) Enter(ctx context.Context, try func() (bool, error)) error {
	pause := g.minPoll
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		// Taken before the try, so a leave between the try and the wait
		// is not missed.
		g.mu.Lock()
		wait := g.released
		g.mu.Unlock()
		admitted, err := try()
		if err != nil {
			return err
		}
		if admitted {
			return nil
		}
		if timer == nil {
			timer = time.NewTimer(pause)
		} else {
			timer.Reset(pause)
		}
		select {
		case <-wait:
		case <-timer.C:
			pause = min(2*pause, g.maxPoll)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Left wakes this node's waiters: a verification ended here.
func (g *Gate) Left() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.released)
	g.released = make(chan struct{})
}
