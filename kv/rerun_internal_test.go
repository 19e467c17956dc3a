package kv

import (
	"errors"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestRerunModeRunsUpdatesTwice: in the retry test mode an update function
// runs twice, and only the second run's writes stay; an error from the
// first run is returned without a second.
func TestRerunModeRunsUpdatesTwice(t *testing.T) {
	was := rerunUpdates.Load()
	RerunUpdatesForTests(true)
	s, err := Open(filepath.Join(t.TempDir(), "sealbox.db"), Options{})
	RerunUpdatesForTests(was)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runs := 0
	err = s.update(func(tx *bolt.Tx) error {
		runs++
		b := tx.Bucket(bucketMeta)
		if v := b.Get([]byte("probe")); v != nil {
			t.Errorf("run %d sees %q written by a rolled-back run", runs, v)
		}
		return b.Put([]byte("probe"), []byte{byte(runs)})
	})
	if err != nil || runs != 2 {
		t.Fatalf("update: %v after %d runs, want 2", err, runs)
	}
	s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get([]byte("probe")); len(v) != 1 || v[0] != 2 {
			t.Fatalf("stored %v, want the second run's write", v)
		}
		return nil
	})
	refused := errors.New("refused")
	runs = 0
	if err := s.update(func(*bolt.Tx) error { runs++; return refused }); !errors.Is(err, refused) || runs != 1 {
		t.Fatalf("a refusing update: %v after %d runs", err, runs)
	}
}
