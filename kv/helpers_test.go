package kv_test

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/kv/pgtest"
)

// TestMain runs the suite in the retry test mode when SEALBOX_TEST_RERUN=1
// (kv.RerunUpdatesForTests): every update function runs twice, the first
// run rolled back. It stops a PostgreSQL cluster the tests started.
func TestMain(m *testing.M) {
	kv.RerunUpdatesForTests(rerunMode)
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

// rerunMode is the retry test mode of this run (SEALBOX_TEST_RERUN=1): a
// test that counts a transaction's work counts it twice in it.
var rerunMode = os.Getenv("SEALBOX_TEST_RERUN") == "1"

// assertFileLacks fails if the raw store at path contains any of secrets:
// the bbolt file's bytes, or, for a store on PostgreSQL (path is its
// schema's URL), every key and value of every table.
func assertFileLacks(tb testing.TB, path string, secrets ...string) {
	tb.Helper()
	raw := pgtest.Dump(tb, path)
	if raw == nil {
		var err error
		if raw, err = os.ReadFile(path); err != nil {
			tb.Fatal(err)
		}
	}
	for _, s := range secrets {
		if bytes.Contains(raw, []byte(s)) {
			tb.Fatalf("the store holds the secret %q", s)
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
