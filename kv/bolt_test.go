package kv_test

import (
	"encoding/binary"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"sealbox/kv"
	"sealbox/kv/engine"
	"sealbox/kv/enginetest"
)

// The bbolt adapter's own tests: the Engine contract every adapter keeps
// (kv/enginetest), and the helpers that write bbolt files by hand, as an
// older sealbox or a damaged disk would leave them. This file and bolt.go
// are the only files of kv that import bbolt.

func TestBoltEngine(t *testing.T) {
	enginetest.Run(t, func(t *testing.T) engine.Engine {
		e, err := kv.OpenBoltEngine(filepath.Join(t.TempDir(), "engine.db"), kv.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return e
	})
}

// writeBoltFile writes buckets (name to keys to values) into the bbolt file
// at path, creating the file and any missing bucket: a file as something
// other than this sealbox wrote it (an older version, a newer one).
func writeBoltFile(t *testing.T, path string, buckets map[string]map[string]string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		for name, pairs := range buckets {
			b, err := tx.CreateBucketIfNotExists([]byte(name))
			if err != nil {
				return err
			}
			for k, v := range pairs {
				if err := b.Put([]byte(k), []byte(v)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// BenchmarkCommitFloor is the floor under every durable store write: one
// bbolt read-write transaction putting one 512-byte value, in a loop. A
// commit writes the dirty pages and fsyncs, then writes the meta page and
// fsyncs again, so it costs about two of server's BenchmarkFsyncBaseline
// (write + fsync of a 512-byte record): no write through the store can
// reach more than half the raw fsync rate. Run both in one command:
// go test ./server ./kv -run '^$' -bench 'FsyncBaseline|CommitFloor'.
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
