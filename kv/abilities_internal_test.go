package kv

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"sealbox/kv/bolt"
	"sealbox/kv/engine"
)

// plainEngine is a bbolt engine with none of its optional abilities: an
// engine.Engine and nothing more, as a networked engine is to the store.
type plainEngine struct{ engine.Engine }

// openWithAbilities opens a store on a bbolt file, with bbolt's abilities
// or, unless abilities, without any.
func openWithAbilities(t *testing.T, abilities bool, opts Options) *Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sealbox.db")
	b, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var e Engine = b
	if !abilities {
		e = plainEngine{b}
	}
	s, err := OpenEngine(e, path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestAttemptLedgerFollowsTheEngine: the store picks where it keeps the
// password verifications in flight from its engine's abilities, when it
// opens: in memory on an engine.Exclusive one (nothing is written, no
// commit), in the password_attempts bucket on any other, where other
// nodes count them.
func TestAttemptLedgerFollowsTheEngine(t *testing.T) {
	p := LockoutPolicy{Failures: 3, Window: 15 * time.Minute}
	for _, exclusive := range []bool{true, false} {
		s := openWithAbilities(t, exclusive, Options{})
		before := s.writes.n.Load()
		if _, ok, err := s.EnterPasswordAttempt("a@example.org", "e1", p, time.Minute); !ok || err != nil {
			t.Fatalf("exclusive=%v: EnterPasswordAttempt = %v, %v", exclusive, ok, err)
		}
		var stored int
		err := s.view(func(tx Tx) error {
			return scanPrefix(tx.Bucket(bucketPasswordAttempts), idPart("a@example.org"), func(_, _ []byte) error { stored++; return nil })
		})
		if err != nil {
			t.Fatal(err)
		}
		commits := s.writes.n.Load() - before
		if exclusive && (stored != 0 || commits != 0) {
			t.Errorf("exclusive engine: %d entries stored, %d commits; want 0 and 0 (kept in memory)", stored, commits)
		}
		if !exclusive && stored != 1 {
			t.Errorf("networked engine: %d entries stored, want 1", stored)
		}
		if err := s.LeavePasswordAttempt("a@example.org", "e1"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSnapshotFollowsTheEngine: an engine with a file snapshots itself;
// one without copies the store into Options.ScratchEngine, and without a
// scratch engine refuses with ErrNoSnapshot. Read caches are kept on an
// exclusive engine only.
func TestSnapshotFollowsTheEngine(t *testing.T) {
	plain := openWithAbilities(t, false, Options{})
	if _, err := plain.WriteSnapshot(&bytes.Buffer{}); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("snapshot without a scratch engine: %v, want ErrNoSnapshot", err)
	}
	if plain.sessionCache != nil || plain.shareCache != nil || plain.accountCache != nil {
		t.Error("a store over a networked engine caches reads")
	}
	copied := openWithAbilities(t, false, Options{ScratchEngine: bolt.OpenScratch})
	var buf bytes.Buffer
	if n, err := copied.WriteSnapshot(&buf); err != nil || n == 0 {
		t.Fatalf("snapshot through the scratch engine: %d bytes, %v", n, err)
	}
	own := openWithAbilities(t, true, Options{})
	if _, err := own.WriteSnapshot(&buf); err != nil {
		t.Fatalf("bbolt's own snapshot: %v", err)
	}
	if own.sessionCache == nil || own.shareCache == nil || own.accountCache == nil {
		t.Error("a store over an exclusive engine keeps no read cache")
	}
}
