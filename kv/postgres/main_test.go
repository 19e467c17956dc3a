package postgres

import (
	"os"
	"testing"

	"sealbox/kv/pgtest"
)

// TestMain stops the PostgreSQL cluster the tests started (kv/pgtest), so
// a run of this package leaves no server behind.
func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}
