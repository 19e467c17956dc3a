package maintenance_test

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/kvtest"
	"sealbox/kv/pgtest"
	"sealbox/server/maintenance"
)

// testClock is a clock tests move instead of sleeping.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// twoNodeStores opens the stores of two nodes with one clock: with
// SEALBOX_TEST_PG, two Stores on one PostgreSQL schema; on bbolt, which one
// process holds, one Store for both.
func twoNodeStores(t *testing.T) ([2]*kv.Store, *testClock) {
	t.Helper()
	c := &testClock{now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
	opts := kv.Options{Now: c.Now}
	var stores [2]*kv.Store
	url := pgtest.URL(t)
	if url == "" {
		s, err := kvtest.Open(filepath.Join(t.TempDir(), "sealbox.db"), opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return [2]*kv.Store{s, s}, c
	}
	for i := range stores {
		var err error
		if stores[i], err = kvtest.OpenPostgres(url, opts); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stores[i].Close() })
	}
	return stores, c
}

// TestOneNodeSweeps: of two nodes sharing a store, the one holding the
// sweep lease sweeps, renewing it on every tick; the other takes over only
// once the holder has stopped for longer than the lease (three intervals).
func TestOneNodeSweeps(t *testing.T) {
	stores, c := twoNodeStores(t)
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
