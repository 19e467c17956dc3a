package bolt_test

import (
	"encoding/binary"
	"path/filepath"
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
