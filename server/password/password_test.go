package password

import (
	"context"
	"crypto/rand"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

var cheap = Params{Time: 1, MemoryKiB: 64, Threads: 1}

var ctx = context.Background()

func TestHashVerify(t *testing.T) {
	h := NewHasher(cheap, rand.Reader, 0)
	enc, err := h.Hash(ctx, "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(enc, "$argon2id$v=19$m=64,t=1,p=1$") {
		t.Fatalf("hash does not carry its parameters: %s", enc)
	}
	for pw, want := range map[string]bool{"correct horse": true, "correct horsE": false, "": false} {
		if got, err := h.Verify(ctx, enc, pw); err != nil || got != want {
			t.Errorf("Verify(%q): got %v, %v; want %v", pw, got, err, want)
		}
	}
}

// A hash made with other parameters still verifies: raising the defaults
// must not lock anyone out.
func TestVerifyUsesStoredParameters(t *testing.T) {
	old, _ := NewHasher(Params{Time: 2, MemoryKiB: 128, Threads: 2}, rand.Reader, 0).Hash(ctx, "pw")
	if ok, err := NewHasher(cheap, rand.Reader, 0).Verify(ctx, old, "pw"); !ok || err != nil {
		t.Fatalf("got %v, %v", ok, err)
	}
}

func TestUnknownAccountNeverVerifies(t *testing.T) {
	h := NewHasher(cheap, rand.Reader, 0)
	if ok, err := h.Verify(ctx, "", "sealbox dummy password"); ok || err != nil {
		t.Fatalf("the dummy hash verified: %v %v", ok, err)
	}
}

func TestMalformedHashIsAnError(t *testing.T) {
	h := NewHasher(cheap, rand.Reader, 0)
	for _, enc := range []string{"plain", "$argon2i$v=19$m=64,t=1,p=1$AAAA$AAAA", "$argon2id$v=19$m=x$AAAA$AAAA", "$argon2id$v=19$m=64,t=1,p=1$!!$AAAA"} {
		if _, err := h.Verify(ctx, enc, "pw"); err == nil {
			t.Errorf("%q: no error", enc)
		}
	}
}

// holdSlots takes every hashing slot of h until the returned release runs,
// as argon2id computations in progress would.
func holdSlots(h *Hasher) (release func()) {
	for range cap(h.sem) {
		h.sem <- struct{}{}
	}
	return func() {
		for range cap(h.sem) {
			<-h.sem
		}
	}
}

// A caller whose context has ended never starts argon2id, whether it ended
// before the call or while the call waited for a slot; and the waiter that
// left no longer counts against the queue.
func TestEndedContextNeverHashes(t *testing.T) {
	h := NewHasher(cheap, rand.Reader, 0)
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := h.Hash(gone, "pw"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Hash with an ended context: got %v, want context.Canceled", err)
	}
	if _, err := h.Verify(gone, "", "pw"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Verify with an ended context: got %v, want context.Canceled", err)
	}

	release := holdSlots(h)
	waiting, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() {
		_, err := h.Hash(waiting, "pw")
		done <- err
	}()
	for h.waiting.Load() == 0 {
		runtime.Gosched()
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a waiter whose context ended: got %v, want context.Canceled", err)
	}
	if n := h.waiting.Load(); n != 0 {
		t.Fatalf("after the waiter left, %d still counted as waiting", n)
	}
	release()
	if _, err := h.Hash(ctx, "pw"); err != nil {
		t.Fatalf("a later caller: %v", err)
	}
}

// Beyond queue waiters, a call fails at once with ErrBusy; the waiters get
// their turn when a slot frees.
// expireBy makes h's waits end when the returned function is called, not
// after a time: a test of the bound never sleeps for it.
func expireBy(h *Hasher) (expire func()) {
	ch := make(chan time.Time)
	h.expire = func(time.Duration) (<-chan time.Time, func() bool) { return ch, func() bool { return true } }
	return func() { close(ch) }
}

// TestWaitIsBounded: calls beyond the slots wait, however many they are;
// when the wait runs out before a slot comes free, they fail with ErrBusy.
func TestWaitIsBounded(t *testing.T) {
	const waiters = 64
	h := NewHasher(cheap, rand.Reader, time.Minute)
	expire := expireBy(h)
	release := holdSlots(h)
	done := make(chan error, waiters)
	for i := range waiters {
		go func() {
			if i%2 == 0 {
				_, err := h.Hash(ctx, "pw")
				done <- err
			} else {
				_, err := h.Verify(ctx, "", "pw")
				done <- err
			}
		}()
	}
	for h.Waiting() < waiters {
		runtime.Gosched()
	}
	expire()
	for range waiters {
		if err := <-done; !errors.Is(err, ErrBusy) {
			t.Fatalf("a call whose wait ran out: got %v, want ErrBusy", err)
		}
	}
	release()
	if _, err := h.Hash(ctx, "pw"); err != nil {
		t.Fatalf("with a slot free: %v", err)
	}
}

// TestWaitersServedInArrivalOrder: a slot freed goes to the caller that has
// waited longest.
func TestWaitersServedInArrivalOrder(t *testing.T) {
	const waiters = 16
	h := NewHasher(cheap, rand.Reader, time.Minute)
	holdSlots(h)
	served := make(chan int, waiters)
	for i := range waiters {
		go func() {
			if err := h.acquire(ctx); err != nil {
				t.Error(err)
			}
			served <- i
		}()
		// Waiting counts a caller before it blocks; its place in the
		// queue is taken when it blocks, so the next caller starts only
		// once this one is parked in acquire's select.
		for parkedInAcquire() < i+1 {
			runtime.Gosched()
		}
	}
	for i := range waiters {
		<-h.sem
		if got := <-served; got != i {
			t.Fatalf("slot %d went to waiter %d, want %d", i, got, i)
		}
	}
}

func TestDefaultWait(t *testing.T) {
	if got := NewHasher(cheap, rand.Reader, 0).wait; got != 10*time.Second {
		t.Fatalf("got %v, want 10s", got)
	}
}

// parkedInAcquire counts the goroutines blocked in acquire's select, read
// off the runtime's goroutine dump: a goroutine's header line names its
// state ("[select]") and its frames follow until a blank line.
func parkedInAcquire() int {
	buf := make([]byte, 1<<20)
	dump := string(buf[:runtime.Stack(buf, true)])
	n := 0
	for _, g := range strings.Split(dump, "\n\n") {
		header, frames, _ := strings.Cut(g, "\n")
		if strings.Contains(header, "[select") && strings.Contains(frames, "password.(*Hasher).acquire(") {
			n++
		}
	}
	return n
}
