package maintenance_test

import (
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/kvtest"
	"sealbox/server/maintenance"
)

// TestOneNodeSweeps: of two nodes sharing a store, the one holding the
// sweep lease sweeps, renewing it on every tick; the other takes over only
// once the holder has stopped for longer than the lease (three intervals).
func TestOneNodeSweeps(t *testing.T) {
	c := kvtest.NewClock()
	stores := kvtest.TwoNodes(t, kv.Options{Now: c.Now})
	opts := func(holder string) maintenance.Options {
		return maintenance.Options{Interval: time.Minute, Holder: holder}
	}
	a, b := maintenance.New(stores[0], nil, opts("node-a/run")), maintenance.New(stores[1], nil, opts("node-b/run"))
	tick := func(n *maintenance.Runner, name string, want bool) {
		t.Helper()
		if got := n.Tick(); got != want {
			t.Fatalf("node %s swept: %v, want %v", name, got, want)
		}
	}
	tick(a, "a", true)
	tick(b, "b", false)
	for range 5 { // a keeps ticking: b never sweeps
		c.Advance(time.Minute)
		tick(a, "a", true)
		tick(b, "b", false)
	}
	c.Advance(2 * time.Minute) // a missed two ticks: still its lease
	tick(b, "b", false)
	c.Advance(time.Minute) // a died three intervals ago
	tick(b, "b", true)
	tick(a, "a", false)
}
