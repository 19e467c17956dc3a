package ratelimit

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestGate: verifications in flight plus counted failures stay under the
// limit; a waiter is admitted when one leaves, gives up with its context,
// and a refusal of counted is returned as is.
func TestGate(t *testing.T) {
	g := NewGate()
	failures := 1
	counted := func() (int, error) { return failures, nil }
	ctx := context.Background()
	first, err := g.Enter(ctx, "a@example.org", 3, counted)
	if err != nil {
		t.Fatal(err)
	}
	second, err := g.Enter(ctx, "a@example.org", 3, counted)
	if err != nil {
		t.Fatal(err)
	}
	// Another address is not held up.
	other, err := g.Enter(ctx, "b@example.org", 3, counted)
	if err != nil {
		t.Fatal(err)
	}
	other()

	admitted := make(chan error, 1)
	go func() {
		leave, err := g.Enter(ctx, "a@example.org", 3, counted)
		if err == nil {
			leave()
		}
		admitted <- err
	}()
	select {
	case err := <-admitted:
		t.Fatalf("a third verification ran with 1 failure and 2 in flight (limit 3): %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	first()
	if err := <-admitted; err != nil {
		t.Fatal(err)
	}

	waiting, cancel := context.WithCancel(ctx)
	failures = 2
	done := make(chan error, 1)
	go func() { _, err := g.Enter(waiting, "a@example.org", 3, counted); done <- err }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled waiter: %v", err)
	}
	second()

	locked := errors.New("locked")
	if _, err := g.Enter(ctx, "a@example.org", 3, func() (int, error) { return 0, locked }); err != locked {
		t.Fatalf("counted's refusal: %v", err)
	}
}
