package ratelimit

import (
	"errors"
	"testing"
	"time"

	"sealbox/kv/fault"
)

// TestRedeem: refusals are counted per address, and fallback-shaped ones
// also across all addresses; a refund gives an attempt back.
func TestRedeem(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	r := NewRedeem(2, 3, 10*time.Minute, func() time.Time { return now })
	for i := range 2 {
		if _, err := r.Admit("10.0.0.1", false); err != nil {
			t.Fatalf("attempt %d: %v", i, err)
		}
	}
	_, err := r.Admit("10.0.0.1", false)
	var e *fault.Error
	if !errors.As(err, &e) || e.Code != fault.ECodeRateLimited || e.RetryAfter <= 0 {
		t.Fatalf("a third refusal from one address: %v", err)
	}
	refund, err := r.Admit("10.0.0.2", true)
	if err != nil {
		t.Fatal(err)
	}
	refund()
	for _, addr := range []string{"10.0.0.3", "10.0.0.4", "10.0.0.5"} {
		if _, err := r.Admit(addr, true); err != nil {
			t.Fatalf("fallback from %s: %v", addr, err)
		}
	}
	if _, err := r.Admit("10.0.0.6", true); fault.ErrorCode(err) != fault.ECodeRateLimited {
		t.Fatalf("a fourth fallback refusal across addresses: %v", err)
	}
	// The full code is not held to the fallback limit.
	if _, err := r.Admit("10.0.0.6", false); err != nil {
		t.Fatalf("a full code after the fallback limit: %v", err)
	}
	now = now.Add(11 * time.Minute)
	if _, err := r.Admit("10.0.0.1", false); err != nil {
		t.Fatalf("after the window: %v", err)
	}
}
