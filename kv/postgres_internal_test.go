package kv

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	"sealbox/kv/pgtest"
)

// TestPostgresCountsRetries: a transaction that loses a serialization
// conflict is run again, and the engine's stats count the lost run; the
// pool's figures are there too. bbolt has no stats.
func TestPostgresCountsRetries(t *testing.T) {
	url := pgtest.URL(t)
	if url == "" {
		bolt, err := Open(filepath.Join(t.TempDir(), "sealbox.db"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer bolt.Close()
		if _, ok := bolt.EngineStats(); ok {
			t.Fatal("bbolt reports engine stats")
		}
		t.Skip("SEALBOX_TEST_PG is not set: the PostgreSQL suite runs in .ci/run")
	}
	e, err := OpenPostgresEngine(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenEngine(e, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before, ok := s.EngineStats()
	if !ok {
		t.Fatal("no engine stats on PostgreSQL")
	}
	if before.MaxConns <= 0 || before.TotalConns <= 0 {
		t.Fatalf("pool stats: %+v", before)
	}
	// The first run of the first update reads a key, then waits while a
	// second update writes it and commits; its own write then conflicts
	// (40001), so it runs again.
	key := []byte("conflict")
	readIt, committed := make(chan struct{}), make(chan struct{})
	var runs atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- e.Update(func(tx Tx) error {
			if _, err := tx.Bucket(bucketLeases).Get(key); err != nil {
				return err
			}
			if runs.Add(1) == 1 {
				close(readIt)
				<-committed
			}
			return tx.Bucket(bucketLeases).Put(key, []byte("first"))
		})
	}()
	<-readIt
	err = e.Update(func(tx Tx) error {
		if _, err := tx.Bucket(bucketLeases).Get(key); err != nil {
			return err
		}
		return tx.Bucket(bucketLeases).Put(key, []byte("second"))
	})
	if err != nil {
		t.Fatal(err)
	}
	close(committed)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	after, _ := s.EngineStats()
	if runs.Load() < 2 || after.TxRetries <= before.TxRetries {
		t.Fatalf("a forced conflict: %d runs, retries %d -> %d", runs.Load(), before.TxRetries, after.TxRetries)
	}
}
