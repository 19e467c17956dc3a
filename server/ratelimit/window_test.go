package ratelimit

import (
	"sealbox/kv/kvtest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestWindowSlides(t *testing.T) {
	c := kvtest.NewClock()
	w := NewWindow(3, 10*time.Minute, c.Now)
	for i := range 3 {
		if _, _, ok := w.Spend("a"); !ok {
			t.Fatalf("spend %d refused", i+1)
		}
		c.Advance(time.Minute)
	}
	// Events at 0, 1m, 2m; now 3m. The oldest leaves the window at 10m.
	_, wait, ok := w.Spend("a")
	if ok || wait != 7*time.Minute {
		t.Fatalf("fourth spend: ok %v, wait %v; want refused, 7m", ok, wait)
	}
	if _, _, ok := w.Spend("b"); !ok {
		t.Fatal("another key was refused")
	}
	c.Advance(7*time.Minute - time.Nanosecond)
	if _, _, ok := w.Spend("a"); ok {
		t.Fatal("admitted before the oldest event left the window")
	}
	c.Advance(time.Nanosecond)
	if _, _, ok := w.Spend("a"); !ok {
		t.Fatal("refused after the oldest event left the window")
	}
}

func TestWindowRefund(t *testing.T) {
	c := kvtest.NewClock()
	w := NewWindow(2, time.Minute, c.Now)
	first, _, _ := w.Spend("a")
	c.Advance(time.Second)
	w.Spend("a")
	if _, _, ok := w.Spend("a"); ok {
		t.Fatal("third spend admitted")
	}
	w.Refund("a", first)
	if _, _, ok := w.Spend("a"); !ok {
		t.Fatal("a refunded event still counts")
	}
	// Refunding what is not held changes nothing.
	w.Refund("a", first)
	w.Refund("unknown", first)
	if _, _, ok := w.Spend("a"); ok {
		t.Fatal("a second refund of one event freed a slot")
	}
}

// Parallel spenders cannot overrun the limit: booking and checking are one
// step.
func TestWindowParallelSpends(t *testing.T) {
	w := NewWindow(10, time.Hour, kvtest.NewClock().Now)
	var admitted atomic.Int32
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, ok := w.Spend("k"); ok {
				admitted.Add(1)
			}
		}()
	}
	wg.Wait()
	if got := admitted.Load(); got != 10 {
		t.Fatalf("admitted %d, want 10", got)
	}
}

func TestWindowMemoryIsBounded(t *testing.T) {
	c := kvtest.NewClock()
	w := NewWindow(1, time.Minute, c.Now)
	for i := range 1000 {
		w.Spend(strconv.Itoa(i))
	}
	c.Advance(time.Minute)
	w.Spend("late")
	if got := w.keys.Len(); got != 1 {
		t.Fatalf("%d keys held after the others went idle, want 1", got)
	}
	for i := range maxKeys + 10 {
		w.Spend("spray" + strconv.Itoa(i))
	}
	if got := w.keys.Len(); got != maxKeys {
		t.Fatalf("%d keys held, want at most %d", got, maxKeys)
	}
}
