package ratelimit

import (
	"context"
	"sync"
)

// Gate admits password verifications per address so that the
// failures the store has counted plus the verifications in flight never
// exceed the lockout limit. Parallel guesses therefore cannot pass the limit
// while their argon2id runs, and parallel correct sign-ins of one account
// wait their turn (a few milliseconds) instead of being refused. The count
// of completed failures lives in the store; what is in flight lives here,
// because it means nothing after a restart.
type Gate struct {
	mu       sync.Mutex
	inflight map[string]int
	// released is closed, and replaced, whenever a verification ends.
	released chan struct{}
}

// NewGate returns a gate with nothing in flight.
func NewGate() *Gate {
	return &Gate{inflight: map[string]int{}, released: make(chan struct{})}
}

// Enter waits until a verification for key may start: failures (read by
// counted, which may also refuse, for example while the address is locked)
// plus those in flight must stay under limit. The returned function ends
// the verification; the caller counts a failure in the store before calling
// it, so the next one admitted sees it.
func (g *Gate) Enter(ctx context.Context, key string, limit int, counted func() (int, error)) (func(), error) {
	for {
		g.mu.Lock()
		failures, err := counted()
		if err != nil {
			g.mu.Unlock()
			return nil, err
		}
		if failures+g.inflight[key] < limit {
			g.inflight[key]++
			g.mu.Unlock()
			return func() { g.leave(key) }, nil
		}
		wait := g.released
		g.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (g *Gate) leave(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inflight[key]--; g.inflight[key] <= 0 {
		delete(g.inflight, key)
	}
	close(g.released)
	g.released = make(chan struct{})
}
