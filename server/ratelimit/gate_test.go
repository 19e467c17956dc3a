package ratelimit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// counter stands in for the store's admission: failures plus those in
// flight stay under limit.
type counter struct {
	mu       sync.Mutex
	failures int
	inflight map[string]int
	limit    int
}

func (c *counter) try(key string) func() (bool, error) {
	return func() (bool, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.failures+c.inflight[key] >= c.limit {
			return false, nil
		}
		c.inflight[key]++
		return true, nil
	}
}

func (c *counter) leave(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inflight[key]--
}

// TestGate: verifications in flight plus counted failures stay under the
// limit; a waiter is admitted as soon as one leaves on this node (long
// before its poll would try again), gives up with its context, and a
// refusal of try is returned as is.
func TestGate(t *testing.T) {
	g := NewGate(time.Hour, time.Hour) // only a local leave wakes a waiter
	c := &counter{failures: 1, inflight: map[string]int{}, limit: 3}
	ctx := context.Background()
	for range 2 {
		if err := g.Enter(ctx, c.try("a@example.org")); err != nil {
			t.Fatal(err)
		}
	}
	// Another address is not held up.
	if err := g.Enter(ctx, c.try("b@example.org")); err != nil {
		t.Fatal(err)
	}
	c.leave("b@example.org")
	g.Left()

	admitted := make(chan error, 1)
	go func() { admitted <- g.Enter(ctx, c.try("a@example.org")) }()
	select {
	case err := <-admitted:
		t.Fatalf("a third verification ran with 1 failure and 2 in flight (limit 3): %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	c.leave("a@example.org")
	g.Left()
	select {
	case err := <-admitted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a local leave did not wake the waiter")
	}

	waiting, cancel := context.WithCancel(ctx)
	c.mu.Lock()
	c.failures = 2
	c.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- g.Enter(waiting, c.try("a@example.org")) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled waiter: %v", err)
	}

	locked := errors.New("locked")
	if err := g.Enter(ctx, func() (bool, error) { return false, locked }); err != locked {
		t.Fatalf("try's refusal: %v", err)
	}
}

// TestGatePollsForRemoteLeaves: a verification that ends on another node
// wakes nobody here; the waiter's poll admits it.
func TestGatePollsForRemoteLeaves(t *testing.T) {
	g := NewGate(time.Millisecond, 5*time.Millisecond)
	c := &counter{inflight: map[string]int{"a": 1}, limit: 1}
	admitted := make(chan error, 1)
	go func() { admitted <- g.Enter(context.Background(), c.try("a")) }()
	time.Sleep(20 * time.Millisecond)
	c.leave("a") // on another node: no Left here
	select {
	case err := <-admitted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiter never saw a leave on another node")
	}
}
