package postgres_test

import (
	"context"
	"testing"

	"sealbox/kv/engine"
	"sealbox/kv/enginetest"
	"sealbox/kv/pgtest"
	"sealbox/kv/postgres"
)

// TestPostgresEngine: the PostgreSQL adapter keeps the Engine contract, on a
// real server (SEALBOX_TEST_PG; .ci/run sets it).
func TestPostgresEngine(t *testing.T) {
	if !pgtest.Enabled() {
		t.Skip("SEALBOX_TEST_PG is not set: the PostgreSQL suite runs in .ci/run")
	}
	enginetest.Run(t, func(t *testing.T) engine.Engine {
		e, err := postgres.Open(context.Background(), pgtest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		return e
	})
}
