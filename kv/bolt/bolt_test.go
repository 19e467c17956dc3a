package bolt_test

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	sbolt "sealbox/kv/bolt"
	"sealbox/kv/engine"
	"sealbox/kv/enginetest"
)

// The bbolt engine's own tests: the Engine contract every engine keeps
// (kv/enginetest), and the floor under every durable write.

func TestBoltEngine(t *testing.T) {
	enginetest.Run(t, func(t *testing.T) engine.Engine {
		e, err := sbolt.Open(filepath.Join(t.TempDir(), "engine.db"), sbolt.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return e
	})
}

// BenchmarkCommitFloor is the floor under every durable store write: one
// bbolt read-write transaction putting one 512-byte value, in a loop. A
// commit writes the dirty pages and fsyncs, then writes the meta page and
// fsyncs again, so it costs about two of server's BenchmarkFsyncBaseline
// (write + fsync of a 512-byte record): no write through the store can
// reach more than half the raw fsync rate. Run both in one command:
// go test -p 1 ./server ./kv/bolt -run '^$' -bench 'FsyncBaseline|CommitFloor'.
func BenchmarkCommitFloor(b *testing.B) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "floor.db"), 0o600, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	value := make([]byte, 512)
	b.ResetTimer()
	for i := range b.N {
		err := db.Update(func(tx *bolt.Tx) error {
			bkt, err := tx.CreateBucketIfNotExists([]byte("records"))
			if err != nil {
				return err
			}
			return bkt.Put(binary.BigEndian.AppendUint64(nil, uint64(i)), value)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// TestOpenRefusesATruncatedFile: a store file cut short of the pages its
// meta page counts (bbolt would fault on the first page past the end, a
// SIGBUS that kills the process), cut inside its meta pages, or emptied
// (bbolt would make a new store of it and the instance would start over)
// is refused as ErrDamaged, saying to restore from a backup and changing
// nothing; a file with unused room past its pages opens.
func TestOpenRefusesATruncatedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sealbox.db")
	e, err := sbolt.Open(path, sbolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.CreateBuckets([][]byte{[]byte("b")}); err != nil {
		t.Fatal(err)
	}
	err = e.Update(func(tx engine.Tx) error {
		for i := range 200 {
			if err := tx.Bucket([]byte("b")).Put(binary.BigEndian.AppendUint32(nil, uint32(i)), make([]byte, 500)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// bbolt grows the file ahead of its pages: cut into the pages
	// themselves, below the high-water mark the meta page counts.
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var hwm int
	db.View(func(tx *bolt.Tx) error { hwm = int(tx.Size()); return nil })
	db.Close()
	pageSize := os.Getpagesize()
	for _, size := range []int{hwm - 1, hwm - pageSize, 5 * pageSize / 2, 100, 0} {
		cut := filepath.Join(t.TempDir(), "sealbox.db")
		if err := os.WriteFile(cut, whole[:size], 0o600); err != nil {
			t.Fatal(err)
		}
		for _, readOnly := range []bool{false, true} {
			_, err := sbolt.Open(cut, sbolt.Options{ReadOnly: readOnly})
			if !errors.Is(err, sbolt.ErrDamaged) || !strings.Contains(err.Error(), "open store "+cut+": the file is damaged: it is ") ||
				!strings.Contains(err.Error(), "estore the instance from a backup (sealbox restore BACKUP --data DIR") {
				t.Fatalf("open of the file cut to %d of %d bytes (read-only %v): %v", size, len(whole), readOnly, err)
			}
		}
		if after, _ := os.ReadFile(cut); len(after) != size {
			t.Fatalf("a refused open changed the file cut to %d bytes: now %d", size, len(after))
		}
	}
	roomy := filepath.Join(t.TempDir(), "sealbox.db")
	if err := os.WriteFile(roomy, append(whole, make([]byte, pageSize)...), 0o600); err != nil {
		t.Fatal(err)
	}
	e, err = sbolt.Open(roomy, sbolt.Options{})
	if err != nil {
		t.Fatalf("open of a file with room past its pages: %v", err)
	}
	e.Close()
}
