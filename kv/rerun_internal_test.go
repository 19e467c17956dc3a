package kv

import (
	"errors"
	"path/filepath"
	"testing"
)

// TestRerunModeRunsUpdatesTwice: in the retry test mode an update function
// runs twice, and only the second run's writes stay; an error from the
// first run is returned without a second.
func TestRerunModeRunsUpdatesTwice(t *testing.T) {
	was := rerunUpdates.Load()
	RerunUpdatesForTests(true)
	s, err := openFile(filepath.Join(t.TempDir(), "sealbox.db"), Options{})
	RerunUpdatesForTests(was)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runs := 0
	err = s.update(func(tx Tx) error {
		runs++
		b := tx.Bucket(bucketMeta)
		if v, err := b.Get([]byte("probe")); v != nil || err != nil {
			t.Errorf("run %d sees %q (%v) written by a rolled-back run", runs, v, err)
		}
		return b.Put([]byte("probe"), []byte{byte(runs)})
	})
	if err != nil || runs != 2 {
		t.Fatalf("update: %v after %d runs, want 2", err, runs)
	}
	err = s.view(func(tx Tx) error {
		if v, err := tx.Bucket(bucketMeta).Get([]byte("probe")); len(v) != 1 || v[0] != 2 {
			t.Fatalf("stored %v (%v), want the second run's write", v, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	refused := errors.New("refused")
	runs = 0
	if err := s.update(func(Tx) error { runs++; return refused }); !errors.Is(err, refused) || runs != 1 {
		t.Fatalf("a refusing update: %v after %d runs", err, runs)
	}
}
