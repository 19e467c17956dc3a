package kv_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/kvtest"
	"sealbox/kv/pgtest"
)

// TestLease: a lease is taken when free, refused to another holder while
// live, renewed by its holder, free again when its ttl has passed (the
// clock moves; nothing sleeps) or when its holder releases it, and swept
// once expired.
func TestLease(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	try := func(holder string, want bool) {
		t.Helper()
		if got, err := s.TryLease("sweep", holder, time.Minute); err != nil || got != want {
			t.Fatalf("TryLease by %s: got %v (%v), want %v", holder, got, err, want)
		}
	}
	try("a", true)
	try("b", false)
	if h, until, err := s.LeaseHolder("sweep"); err != nil || h != "a" || !until.Equal(c.Now().Add(time.Minute)) {
		t.Fatalf("LeaseHolder: %q until %v (%v)", h, until, err)
	}
	c.Advance(50 * time.Second)
	try("a", true) // renewed: now lives until 110 s
	c.Advance(50 * time.Second)
	try("b", false)
	c.Advance(10 * time.Second)
	try("b", true) // a's renewal has lapsed
	try("a", false)
	if err := s.ReleaseLease("sweep", "a"); err != nil { // not a's: kept
		t.Fatal(err)
	}
	try("a", false)
	if err := s.ReleaseLease("sweep", "b"); err != nil {
		t.Fatal(err)
	}
	if h, _, err := s.LeaseHolder("sweep"); err != nil || h != "" {
		t.Fatalf("a released lease is held by %q (%v)", h, err)
	}
	try("a", true)
	c.Advance(time.Minute)
	if h, _, err := s.LeaseHolder("sweep"); err != nil || h != "" {
		t.Fatalf("an expired lease is held by %q (%v)", h, err)
	}
	if n, err := s.Sweep(); err != nil || n != 1 {
		t.Fatalf("sweep of the expired lease: %d entries (%v)", n, err)
	}
	try("b", true)
}

// TestLeaseOneHolderAtATime: holders racing for a free lease, one take
// each, leave exactly one holder.
func TestLeaseOneHolderAtATime(t *testing.T) {
	s, _ := kvtest.MustOpenStore(t)
	racers := []*kv.Store{s, s, s, s, s, s, s, s}
	if won := raceForLease(t, racers); won != 1 {
		t.Fatalf("%d holders took one lease", won)
	}
}

// raceForLease has one holder per store take the lease "gc" at once and
// counts those that got it.
func raceForLease(t *testing.T, stores []*kv.Store) int {
	t.Helper()
	var mu sync.Mutex
	won := 0
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Go(func() {
			ok, err := s.TryLease("gc", string(rune('a'+i)), time.Minute)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				won++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return won
}

// twoNodes opens two Stores on one PostgreSQL schema with one clock: two
// nodes of one instance. It skips without SEALBOX_TEST_PG.
func twoNodes(t *testing.T) (a, b *kv.Store, c *kvtest.Clock) {
	t.Helper()
	if !pgtest.Enabled() {
		t.Skip("two nodes need a networked engine: set SEALBOX_TEST_PG")
	}
	c = kvtest.NewClock()
	nodes := kvtest.TwoNodes(t, kv.Options{Now: c.Now})
	return nodes[0], nodes[1], c
}

// TestNodesShareLeases: a lease one node holds is refused to the other
// until it lapses or is released, and nodes racing for it leave one holder.
func TestNodesShareLeases(t *testing.T) {
	a, b, c := twoNodes(t)
	for _, name := range []string{"sweep", "tus/0b6c3f0e-5d7c-4f51-9c1e-3b2f4a5d6e7f"} {
		if ok, err := a.TryLease(name, "node-a", 30*time.Second); err != nil || !ok {
			t.Fatalf("%s: node a: %v %v", name, ok, err)
		}
		if ok, err := b.TryLease(name, "node-b", 30*time.Second); err != nil || ok {
			t.Fatalf("%s: node b took node a's live lease: %v %v", name, ok, err)
		}
		c.Advance(30 * time.Second) // node a died without releasing it
		if ok, err := b.TryLease(name, "node-b", 30*time.Second); err != nil || !ok {
			t.Fatalf("%s: node b after node a's lease lapsed: %v %v", name, ok, err)
		}
		if err := b.ReleaseLease(name, "node-b"); err != nil {
			t.Fatal(err)
		}
		if ok, err := a.TryLease(name, "node-a", 30*time.Second); err != nil || !ok {
			t.Fatalf("%s: node a after node b released it: %v %v", name, ok, err)
		}
	}
	if won := raceForLease(t, []*kv.Store{a, b, a, b, a, b}); won != 1 {
		t.Fatalf("%d holders on two nodes took one lease", won)
	}
}

// TestReopenedFileDropsLeases: one process holds a bbolt file at a time, so
// the leases and verifications in flight a reopened file holds were a dead
// process's: Open drops them, and the work they claimed resumes at once.
func TestReopenedFileDropsLeases(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sealbox.db")
	now := func() time.Time { return time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC) }
	s, err := kvtest.Open(path, kv.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	kv.KeepAttemptsInStoreForTests(s)
	p := kv.LockoutPolicy{Failures: 1, Window: time.Minute}
	if held, err := s.TryLease("tus/x", "dead", time.Hour); err != nil || !held {
		t.Fatal(held, err)
	}
	if _, ok, err := s.EnterPasswordAttempt("a@example.org", "dead/1", p, time.Hour); err != nil || !ok {
		t.Fatal(ok, err)
	}
	s.Close() // the process dies holding both
	if s, err = kvtest.Open(path, kv.Options{Now: now}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	kv.KeepAttemptsInStoreForTests(s)
	if held, err := s.TryLease("tus/x", "next", time.Hour); err != nil || !held {
		t.Fatalf("the dead process's lease after reopening: %v %v", held, err)
	}
	if _, ok, err := s.EnterPasswordAttempt("a@example.org", "next/1", p, time.Hour); err != nil || !ok {
		t.Fatalf("the dead process's verification after reopening: %v %v", ok, err)
	}
}

// TestConcurrentLeasesCommitTogether: 32 writers taking and releasing
// leases of their own (a tus PATCH does both for its transfer) are
// committed together on an engine that counts its conflict retries
// (PostgreSQL), rather than losing conflicts on the leases' index.
func TestConcurrentLeasesCommitTogether(t *testing.T) {
	s, _ := kvtest.MustOpenStore(t)
	writers, each := 32, 8
	if rerunMode {
		each = 1 // every take alone, each conflict retried with a pause
	}
	before, counted := s.EngineStats()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				name := fmt.Sprintf("tus/%d-%d", w, i)
				if ok, err := s.TryLease(name, "node", time.Minute); !ok || err != nil {
					t.Errorf("take %s: %v, %v", name, ok, err)
				}
				if err := s.ReleaseLease(name, "node"); err != nil {
					t.Errorf("release %s: %v", name, err)
				}
			}
		})
	}
	wg.Wait()
	// The retry test mode (TestMain) runs every update alone, never
	// batched: it counts the conflicts of takes that are not together.
	if !counted || rerunMode {
		return
	}
	after, _ := s.EngineStats()
	if retries := after.TxRetries - before.TxRetries; retries > uint64(2*writers*each/10) {
		t.Errorf("%d takes and releases took %d retries (%v), want at most one per ten", 2*writers*each, retries, after.Conflicts)
	}
}
