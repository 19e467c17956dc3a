package postgres

import (
	"context"
	"testing"

	"sealbox/kv/pgtest"
)

// openTestEngine opens an engine on a schema of the test's own, with the
// named buckets, closed when the test ends; without a server
// (SEALBOX_TEST_PG) it skips the test.
func openTestEngine(t testing.TB, buckets ...[]byte) *Engine {
	t.Helper()
	if !pgtest.Enabled() {
		t.Skip("SEALBOX_TEST_PG is not set: the PostgreSQL suite runs in .ci/run")
	}
	e, err := Open(context.Background(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if err := e.CreateBuckets(buckets); err != nil {
		t.Fatal(err)
	}
	return e
}
