package kv_test

import (
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/kv/kvtest"
)

// TestSweepProcessesOnlyWhatIsDue: nothing is due before its expiry;
// afterwards DueExpiries counts what Sweep then removes, and the records are
// gone.
func TestSweepProcessesOnlyWhatIsDue(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	a := mustAccount(t, s, c, 1)
	s.PutRevokeChallenge(a.ID, "sbx_ch_due", kv.Deadline(c.Now(), 5*time.Minute))
	s.CountPasswordFailure(a.Email, kv.LockoutPolicy{Failures: 10, Window: 15 * time.Minute})
	if n, err := s.DueExpiries(); err != nil || n != 0 {
		t.Fatalf("due before any expiry: %d %v", n, err)
	}
	c.Advance(6 * time.Minute)
	due, err := s.DueExpiries()
	if err != nil || due != 1 {
		t.Fatalf("due after the challenge's expiry: %d %v", due, err)
	}
	if n, err := s.Sweep(); err != nil || n != due {
		t.Fatalf("swept %d (%v), want %d", n, err, due)
	}
	if n, _ := s.DueExpiries(); n != 0 {
		t.Fatalf("%d still due after a sweep", n)
	}
	if _, _, err := s.BurnRevokeChallenge("sbx_ch_due"); fault.ErrorCode(err) != fault.ECodeChallengeExpired {
		t.Fatalf("the swept challenge: %v", err)
	}
	// The access token expired at 15 minutes; the session lives until its
	// refresh expiry, the lockout until its window ends.
	c.Advance(24 * time.Hour)
	if n, err := s.Sweep(); err != nil || n < 2 {
		t.Fatalf("a day later swept %d (%v), want the session and the lockout", n, err)
	}
	if l, _ := s.Ledger(a.ID); len(l.Sessions) != 0 {
		t.Fatalf("%d sessions outlived their refresh expiry", len(l.Sessions))
	}
}

func TestDeadlineIsWholeSeconds(t *testing.T) {
	now := time.Date(2026, 11, 24, 10, 0, 0, 999_999_999, time.UTC)
	if got := kv.Deadline(now, 5*time.Minute); !got.Equal(time.Date(2026, 11, 24, 10, 5, 0, 0, time.UTC)) {
		t.Fatalf("Deadline: %v", got)
	}
}
