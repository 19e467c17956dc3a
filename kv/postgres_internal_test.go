package kv

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"

	"sealbox/kv/pgtest"
	"sealbox/kv/postgres"
)

// TestPostgresCountsRetries: a transaction that loses a serialization
// conflict is run again, and the engine's stats count the lost run; the
// pool's figures are there too. bbolt has no stats.
func TestPostgresCountsRetries(t *testing.T) {
	url := pgtest.URL(t)
	if url == "" {
		bolt, err := openFile(filepath.Join(t.TempDir(), "sealbox.db"), Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer bolt.Close()
		if _, ok := bolt.EngineStats(); ok {
			t.Fatal("bbolt reports engine stats")
		}
		t.Skip("SEALBOX_TEST_PG is not set: the PostgreSQL suite runs in .ci/run")
	}
	s := openPostgresStore(t, url)
	e := s.engine
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
	err := e.Update(func(tx Tx) error {
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

// TestPostgresRoundTrips: a transaction costs one round trip per read (the
// first carries its BEGIN; a key read again costs none) plus one for its
// writes and COMMIT together; a view's COMMIT is its one more, sent after
// the view has returned; a transaction that neither reads nor writes costs
// none; a read of one record, or of an index and the record it names, is
// one statement alone.
func TestPostgresRoundTrips(t *testing.T) {
	url := pgtest.URL(t)
	if url == "" {
		t.Skip("SEALBOX_TEST_PG is not set: the PostgreSQL suite runs in .ci/run")
	}
	s := openPostgresStore(t, url)
	bucket := tx2bucket(bucketMeta)
	for _, tc := range []struct {
		name              string
		run               func(fn func(Tx) error) error
		fn                func(Tx) error
		roundTrips, reads uint64
	}{
		{"nothing", s.engine.Update, func(Tx) error { return nil }, 0, 0},
		{"writes only", s.engine.Update, func(tx Tx) error {
			return errors.Join(bucket(tx).Put([]byte("a"), []byte("1")), bucket(tx).Put([]byte("b"), []byte("2")))
		}, 1, 0},
		{"two reads and a write", s.engine.Update, func(tx Tx) error {
			_, err1 := bucket(tx).Get([]byte("a"))
			_, err2 := bucket(tx).Get([]byte("b"))
			return errors.Join(err1, err2, bucket(tx).Put([]byte("c"), []byte("3")))
		}, 3, 2},
		{"a key read twice", s.engine.View, func(tx Tx) error {
			_, err1 := bucket(tx).Get([]byte("a"))
			_, err2 := bucket(tx).Get([]byte("a"))
			_, err3 := bucket(tx).Get([]byte("missing"))
			_, err4 := bucket(tx).Get([]byte("missing"))
			return errors.Join(err1, err2, err3, err4)
		}, 3, 2},
		{"a view of one read", s.engine.View, func(tx Tx) error {
			_, err := bucket(tx).Get([]byte("a"))
			return err
		}, 2, 1},
		{"a scan", s.engine.View, func(tx Tx) error {
			return bucket(tx).Scan(Range{Limit: 10}, func(_, _ []byte) error { return nil })
		}, 2, 1},
		{"a read of one record", nil, func(Tx) error {
			_, err := s.readOne(bucketMeta, []byte("a"))
			return err
		}, 1, 1},
		{"an index and its record", nil, func(Tx) error {
			_, err := s.follow(bucketMeta, []byte("a"), bucketMeta)
			return err
		}, 1, 1},
	} {
		if tc.run == nil {
			tc.run = func(fn func(Tx) error) error { return fn(nil) }
		}
		before, _ := s.EngineStats()
		if err := tc.run(tc.fn); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		after, _ := s.EngineStats()
		if rt, r := after.RoundTrips-before.RoundTrips, after.Reads-before.Reads; rt != tc.roundTrips || r != tc.reads {
			t.Errorf("%s: %d round trips, %d reads; want %d, %d", tc.name, rt, r, tc.roundTrips, tc.reads)
		}
	}
}

// tx2bucket returns a function giving the transaction's bucket name.
func tx2bucket(name []byte) func(Tx) Bucket {
	return func(tx Tx) Bucket { return tx.Bucket(name) }
}

// openPostgresStore opens the store on the PostgreSQL schema url; it is
// closed when the test ends.
func openPostgresStore(t *testing.T, url string) *Store {
	t.Helper()
	e, err := postgres.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenEngine(e, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestPostgresPingReachesTheServer: Ping reads, so the readiness probe
// reaches the database server (a transaction that reads nothing sends
// nothing).
func TestPostgresPingReachesTheServer(t *testing.T) {
	url := pgtest.URL(t)
	if url == "" {
		t.Skip("SEALBOX_TEST_PG is not set: the PostgreSQL suite runs in .ci/run")
	}
	s := openPostgresStore(t, url)
	before, _ := s.EngineStats()
	if err := s.Ping(); err != nil {
		t.Fatal(err)
	}
	if after, _ := s.EngineStats(); after.Reads != before.Reads+1 {
		t.Fatalf("Ping made %d reads, want 1", after.Reads-before.Reads)
	}
}
