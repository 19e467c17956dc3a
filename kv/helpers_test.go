package kv_test

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"sealbox/kv"
	"sealbox/kv/fault"
)

// TestMain runs the suite in the retry test mode when SEALBOX_TEST_RERUN=1
// (kv.RerunUpdatesForTests): every update function runs twice, the first
// run rolled back.
func TestMain(m *testing.M) {
	kv.RerunUpdatesForTests(os.Getenv("SEALBOX_TEST_RERUN") == "1")
	os.Exit(m.Run())
}

// assertFileLacks fails if the raw file at path contains any of secrets.
func assertFileLacks(tb testing.TB, path string, secrets ...string) {
	tb.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	for _, s := range secrets {
		if bytes.Contains(raw, []byte(s)) {
			tb.Fatalf("the database file holds the secret %q", s)
		}
	}
}

// sessionsOf lists the account's live sessions, oldest first, as the
// ledger reads them.
func sessionsOf(tb testing.TB, s *kv.Store, accountID string) []*kv.Session {
	tb.Helper()
	l, err := s.Ledger(accountID)
	if err != nil {
		tb.Fatal(err)
	}
	return l.Sessions
}

// asError finds the *fault.Error in err.
func asError(err error, target **fault.Error) bool { return errors.As(err, target) }
