package kv_test

import (
	"errors"
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/bolt"
	"sealbox/kv/kvtest"
)

// handTicker is the ticks of every Lease of one store, sent by the test:
// renewals happen when the test says, and only then.
type handTicker chan time.Time

func (h handTicker) ticker(time.Duration) (<-chan time.Time, func()) { return h, func() {} }

// tick has the lease renew itself once and waits until the renewal is in
// the store (its expiry moved to now+ttl) or the lease is lost.
func (h handTicker) tick(t *testing.T, s *kv.Store, l *kv.Lease, want time.Time) {
	t.Helper()
	select {
	case h <- time.Time{}:
	case <-l.Lost():
		return
	}
	deadline := time.Now().Add(10 * time.Second) // a wait for a goroutine, not for an expiry
	for {
		if _, until, err := s.LeaseHolder(l.Name()); err != nil || until.Equal(want) {
			return
		}
		select {
		case <-l.Lost():
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the lease did not renew itself on its tick")
		}
		time.Sleep(time.Millisecond)
	}
}

// mustOpenTickedStore is MustOpenStore whose leases renew on the test's
// ticks.
func mustOpenTickedStore(t *testing.T) (*kv.Store, *kvtest.Clock, handTicker) {
	t.Helper()
	c := kvtest.NewClock()
	h := make(handTicker)
	s := kvtest.LocationIn(t, t.TempDir()).MustOpen(t, kv.Options{Now: c.Now, Ticker: h.ticker}, bolt.Options{})
	return s, c, h
}

func isLost(l *kv.Lease) bool {
	select {
	case <-l.Lost():
		return true
	default:
		return false
	}
}

// TestLeaseRenewsItself: a taken lease is refused to another holder (who is
// told who holds it and until when), renews itself on its ticks, so it
// outlives its first ttl, and once released is free at once.
func TestLeaseRenewsItself(t *testing.T) {
	s, c, h := mustOpenTickedStore(t)
	const ttl = 30 * time.Second
	l, err := s.TakeLease("sweep", "node-a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.TakeLease("sweep", "node-b", ttl)
	var held *kv.LeaseHeldError
	if !errors.Is(err, kv.ErrLeaseHeld) || !errors.As(err, &held) || held.Holder != "node-a" || !held.Until.Equal(c.Now().Add(ttl)) {
		t.Fatalf("a second holder: %v, want node-a's lease until %v", err, c.Now().Add(ttl))
	}
	for range 4 { // 80 s in all: past the first ttl, renewed on each tick
		c.Advance(ttl * 2 / 3)
		h.tick(t, s, l, c.Now().Add(ttl))
		if holder, until, err := s.LeaseHolder("sweep"); err != nil || holder != "node-a" || !until.Equal(c.Now().Add(ttl)) {
			t.Fatalf("after a tick: held by %q until %v (%v), want node-a until %v", holder, until, err, c.Now().Add(ttl))
		}
	}
	if isLost(l) {
		t.Fatal("a renewed lease reports itself lost")
	}
	if err := l.Confirm(); err != nil {
		t.Fatalf("Confirm of a held lease: %v", err)
	}
	for range 2 {
		if err := l.Release(); err != nil {
			t.Fatal(err)
		}
	}
	other, err := s.TakeLease("sweep", "node-b", ttl)
	if err != nil {
		t.Fatalf("after the release: %v", err)
	}
	if err := other.Release(); err != nil {
		t.Fatal(err)
	}
}

// TestLeaseLostToAnotherHolder: a lease whose ttl passed without a renewal
// (its holder stalled) and that another holder took is lost: the next
// renewal closes Lost, Confirm says ErrLeaseLost, and Release leaves the
// new holder's lease alone.
func TestLeaseLostToAnotherHolder(t *testing.T) {
	s, c, h := mustOpenTickedStore(t)
	const ttl = 30 * time.Second
	l, err := s.TakeLease("tus/t1", "node-a/1", ttl)
	if err != nil {
		t.Fatal(err)
	}
	c.Advance(ttl)
	if ok, err := s.TryLease("tus/t1", "node-b/1", ttl); err != nil || !ok {
		t.Fatalf("another holder after the ttl: %v %v", ok, err)
	}
	if err := l.Confirm(); !errors.Is(err, kv.ErrLeaseLost) {
		t.Fatalf("Confirm of a lease another took: %v, want ErrLeaseLost", err)
	}
	select {
	case <-l.Lost():
	default:
		t.Fatal("Lost is open after the lease was lost")
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if holder, _, err := s.LeaseHolder("tus/t1"); err != nil || holder != "node-b/1" {
		t.Fatalf("the lost lease's release left it to %q (%v), want node-b/1", holder, err)
	}

	// Found by the renewal on its tick, with no Confirm.
	l, err = s.TakeLease("gc", "gc/a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	c.Advance(ttl)
	if ok, err := s.TryLease("gc", "gc/b", ttl); err != nil || !ok {
		t.Fatalf("another holder after the ttl: %v %v", ok, err)
	}
	h <- time.Time{}
	select {
	case <-l.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("the renewal did not report the lease lost")
	}
	l.Release()
}

// TestLeaseLapsedIsLost: a holder that let its lease expire has lost it even
// when no one took it meanwhile, since someone may have held it in between.
func TestLeaseLapsedIsLost(t *testing.T) {
	s, c, _ := mustOpenTickedStore(t)
	l, err := s.TakeLease("sweep", "node-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	c.Advance(time.Minute)
	if err := l.Confirm(); !errors.Is(err, kv.ErrLeaseLost) || !isLost(l) {
		t.Fatalf("Confirm of a lapsed lease: %v (lost %v), want ErrLeaseLost", err, isLost(l))
	}
}

// TestLeaseLostWhenTheStoreIsUnreachable: a renewal that fails keeps the
// lease while its ttl lasts (the next one may succeed) and loses it once
// the ttl has passed, since another node may have taken it.
func TestLeaseLostWhenTheStoreIsUnreachable(t *testing.T) {
	s, c, _ := mustOpenTickedStore(t)
	l, err := s.TakeLease("sweep", "node-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	c.Advance(59 * time.Second)
	if err := l.Confirm(); err == nil || errors.Is(err, kv.ErrLeaseLost) || isLost(l) {
		t.Fatalf("Confirm within the ttl on a closed store: %v (lost %v), want the store's error", err, isLost(l))
	}
	c.Advance(time.Second)
	if err := l.Confirm(); !errors.Is(err, kv.ErrLeaseLost) || !isLost(l) {
		t.Fatalf("Confirm past the ttl on a closed store: %v (lost %v), want ErrLeaseLost", err, isLost(l))
	}
	l.Release()
}
