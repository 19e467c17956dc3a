package cli

import (
	"os"
	"testing"

	"sealbox/kv/pgtest"
)

// TestMain stops the PostgreSQL cluster a test started (SEALBOX_TEST_PG=1).
func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}
