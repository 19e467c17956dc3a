package kv_test

import (
	"sealbox/kv/kvtest"
	"testing"
	"time"
)

// TestLedgerCohorts: each sign-in under a cohort moves its last sighting;
// the first stays; a sign-in without one records nothing; the ledger lists
// sessions oldest first and cohorts by first sighting.
func TestLedgerCohorts(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	a := mustAccount(t, s, c, 1)
	first := c.Now()
	signIn := func(id, cohort string) {
		t.Helper()
		c.Advance(time.Minute)
		sess := newSession(c, a.ID, id)
		sess.CohortHash = cohort
		if err := s.LoginSucceeded(a.Email, sess, "at-"+id, "rt-"+id); err != nil {
			t.Fatal(err)
		}
	}
	signIn("s1", "laptop")
	signIn("s2", "phone")
	signIn("s3", "laptop")
	signIn("s4", "")
	l, err := s.Ledger(a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Sessions) != 5 || !l.Sessions[0].CreatedAt.Equal(first) || l.Sessions[4].ID != "s4" {
		t.Fatalf("sessions: %d, first created %v", len(l.Sessions), l.Sessions[0].CreatedAt)
	}
	if len(l.Cohorts) != 2 || l.Cohorts[0].Hash != "laptop" || l.Cohorts[1].Hash != "phone" {
		t.Fatalf("cohorts: %+v", l.Cohorts)
	}
	laptop := l.Cohorts[0]
	if !laptop.FirstSeen.Equal(first.Add(time.Minute)) || !laptop.LastSeen.Equal(first.Add(3*time.Minute)) {
		t.Fatalf("laptop seen %v to %v", laptop.FirstSeen, laptop.LastSeen)
	}
}
