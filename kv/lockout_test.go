package kv_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/kv/kvtest"
)

// TestLockout: failures count per address, known or not; the limit locks
// the address for the window (with the time left), the lock ends on its
// own, and a count whose last failure left the window starts again.
func TestLockout(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	a := mustAccount(t, s, c, 1)
	p := kv.LockoutPolicy{Failures: 3, Window: 15 * time.Minute}
	for _, email := range []string{a.Email, "nobody@example.org"} {
		for i := range 3 {
			acct, failures, err := s.PasswordAttempt(email, p)
			if err != nil || failures != i || (acct == nil) != (email != a.Email) {
				t.Fatalf("%s attempt %d: %v %d %v", email, i, acct, failures, err)
			}
			if err := s.CountPasswordFailure(email, p); err != nil {
				t.Fatal(err)
			}
		}
		_, _, err := s.PasswordAttempt(email, p)
		var e *fault.Error
		if !errors.As(err, &e) || e.Code != fault.ECodeAccountLocked || e.RetryAfter != 15*time.Minute {
			t.Fatalf("%s after 3 failures: %v", email, err)
		}
	}
	c.Advance(15 * time.Minute)
	if _, failures, err := s.PasswordAttempt(a.Email, p); err != nil || failures != 0 {
		t.Fatalf("after the lock: %d %v", failures, err)
	}
	s.CountPasswordFailure(a.Email, p)
	c.Advance(16 * time.Minute)
	if _, failures, _ := s.PasswordAttempt(a.Email, p); failures != 0 {
		t.Fatalf("a failure older than the window still counts: %d", failures)
	}
}

// TestPasswordAttemptsInFlight: failures counted plus verifications in
// flight stay under the limit; a refused entry writes nothing and is
// admitted once another leaves; a locked address is refused before any
// count; an entry whose node died stops counting after its ttl and is
// swept.
//
// It runs twice: with the entries where the store keeps them for its engine
// (in memory for bbolt, which one process holds; in the store for
// PostgreSQL), and with them kept in the store whatever the engine.
func TestPasswordAttemptsInFlight(t *testing.T) {
	t.Run("as the engine has them", func(t *testing.T) {
		s, c := kvtest.MustOpenStore(t)
		testPasswordAttemptsInFlight(t, s, c)
	})
	t.Run("in the store", func(t *testing.T) {
		s, c := kvtest.MustOpenStore(t)
		kv.KeepAttemptsInStoreForTests(s)
		testPasswordAttemptsInFlight(t, s, c)
	})
}

func testPasswordAttemptsInFlight(t *testing.T, s *kv.Store, c *kvtest.Clock) {
	a := mustAccount(t, s, c, 1)
	p := kv.LockoutPolicy{Failures: 3, Window: 15 * time.Minute}
	const ttl = time.Minute
	enter := func(entry string, want bool) {
		t.Helper()
		acct, ok, err := s.EnterPasswordAttempt(a.Email, entry, p, ttl)
		if err != nil || ok != want || acct == nil || acct.ID != a.ID {
			t.Fatalf("enter %s: admitted %v, account %v (%v); want admitted %v", entry, ok, acct, err, want)
		}
	}
	if err := s.CountPasswordFailure(a.Email, p); err != nil {
		t.Fatal(err)
	}
	enter("e1", true)
	enter("e2", true)
	enter("e3", false)
	// Another address is not held up, and an unknown one names no account.
	if acct, ok, err := s.EnterPasswordAttempt("nobody@example.org", "e1", p, ttl); err != nil || !ok || acct != nil {
		t.Fatalf("another address: %v %v %v", acct, ok, err)
	}
	if err := s.LeavePasswordAttempt(a.Email, "e1"); err != nil {
		t.Fatal(err)
	}
	enter("e3", true)
	// e2 fails: counted and ended at once; the limit is reached with e3.
	if err := s.PasswordFailed(a.Email, "e2", p); err != nil {
		t.Fatal(err)
	}
	if _, failures, err := s.PasswordAttempt(a.Email, p); err != nil || failures != 2 {
		t.Fatalf("failures after e2 failed: %d (%v)", failures, err)
	}
	enter("e4", false)
	if err := s.CountPasswordFailure(a.Email, p); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.EnterPasswordAttempt(a.Email, "e4", p, ttl); fault.ErrorCode(err) != fault.ECodeAccountLocked {
		t.Fatalf("a locked address: %v", err)
	}
	s.LeavePasswordAttempt(a.Email, "e3")

	// A node that died leaves its entries; they lapse with their ttl.
	c.Advance(p.Window)
	enter("dead1", true)
	enter("dead2", true)
	enter("dead3", true)
	enter("e5", false)
	c.Advance(ttl)
	enter("e5", true)
	if err := s.LeavePasswordAttempt(a.Email, "e5"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Sweep(); err != nil {
		t.Fatal(err)
	} else if n == 0 {
		t.Fatal("nothing swept")
	}
	enter("e6", true)
	enter("e7", true)
	enter("e8", true)
}

// TestNodesBoundGuessesTogether: two nodes admitting verifications for one
// address at once never have more in flight, together, than the limit.
func TestNodesBoundGuessesTogether(t *testing.T) {
	a, b, c := twoNodes(t)
	mustAccount(t, a, c, 1)
	p := kv.LockoutPolicy{Failures: 4, Window: 15 * time.Minute}
	var mu sync.Mutex
	var admitted []string
	var wg sync.WaitGroup
	for i := range 16 {
		node := []*kv.Store{a, b}[i%2]
		wg.Go(func() {
			entry := fmt.Sprintf("e%d", i)
			_, ok, err := node.EnterPasswordAttempt("u1@example.org", entry, p, time.Minute)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				admitted = append(admitted, entry)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(admitted) != p.Failures {
		t.Fatalf("%d verifications admitted on two nodes, limit %d", len(admitted), p.Failures)
	}
	// One leaves through node a: one more is admitted, through node b, and
	// no second.
	if err := a.LeavePasswordAttempt("u1@example.org", admitted[0]); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.EnterPasswordAttempt("u1@example.org", "x1", p, time.Minute); err != nil || !ok {
		t.Fatalf("after one left: %v %v", ok, err)
	}
	if _, ok, err := a.EnterPasswordAttempt("u1@example.org", "x2", p, time.Minute); err != nil || ok {
		t.Fatalf("a fifth in flight: %v %v", ok, err)
	}
}
