package kv_test

import (
	"errors"
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/fault"
)

// TestLockout: failures count per address, known or not; the limit locks
// the address for the window (with the time left), the lock ends on its
// own, and a count whose last failure left the window starts again.
func TestLockout(t *testing.T) {
	s, c := MustOpenStore(t)
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
