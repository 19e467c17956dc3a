package kv_test

import (
	"testing"

	"sealbox/kv"
	"sealbox/kv/kvtest"
)

// TestAccountKeysArePrefixSafe: ids of any length are taken, so an account
// whose id is a prefix of another's ("acct-1" of "acct-10") must never see,
// nor revoke, the other's rows through a prefix scan.
func TestAccountKeysArePrefixSafe(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	short := mustAccount(t, s, c, 1)
	long := mustAccount(t, s, c, 10)
	withCohort := newSession(c, long.ID, "sess-10-1")
	withCohort.CohortHash = "cohort-of-10"
	if err := s.LoginSucceeded(long.Email, withCohort, "at-10-1", "rt-10-1"); err != nil {
		t.Fatal(err)
	}

	l, err := s.Ledger(short.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Sessions) != 1 || l.Sessions[0].AccountID != short.ID {
		t.Fatalf("%s's ledger lists %d sessions: %v", short.ID, len(l.Sessions), sessionIDs(l.Sessions))
	}
	if len(l.Cohorts) != 0 {
		t.Fatalf("%s's ledger lists another account's cohort: %q", short.ID, l.Cohorts[0].Hash)
	}

	n, err := s.DeleteAccountSessions(short.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("revoking %s's sessions removed %d, want 1", short.ID, n)
	}
	if got := sessionsOf(t, s, long.ID); len(got) != 2 {
		t.Fatalf("%s kept %d sessions after %s's were revoked, want 2", long.ID, len(got), short.ID)
	}
	l, err = s.Ledger(long.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Cohorts) != 1 || l.Cohorts[0].Hash != "cohort-of-10" {
		t.Fatalf("%s's cohorts: %v", long.ID, l.Cohorts)
	}
}

func sessionIDs(sessions []*kv.Session) []string {
	ids := make([]string, len(sessions))
	for i, s := range sessions {
		ids[i] = s.ID
	}
	return ids
}
