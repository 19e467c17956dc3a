package kv_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/bolt"
	"sealbox/kv/kvtest"
)

// BenchmarkApplyOp isolates the store's share of a lifecycle op, the group
// commit: creates of distinct assets in one album by 1 and by 64 concurrent
// writers, with the tuned batch options and with bbolt's defaults (1000
// ops, 10ms). No blob file is written here; BenchmarkOpCreate in server
// measures the whole op.
func BenchmarkApplyOp(b *testing.B) {
	for _, tuning := range []struct {
		name string
		opts bolt.Options
	}{
		{"tuned", bolt.Options{}},
		{"bbolt-defaults", bolt.Options{MaxBatchSize: 1000, MaxBatchDelay: 10 * time.Millisecond}},
	} {
		for _, writers := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/writers=%d", tuning.name, writers), func(b *testing.B) {
				benchApplyOp(b, tuning.opts, writers)
			})
		}
	}
}

func benchApplyOp(b *testing.B, bo bolt.Options, writers int) {
	c := kvtest.NewClock()
	s, err := kvtest.OpenBolt(filepath.Join(b.TempDir(), "sealbox.db"), kv.Options{Now: c.Now}, bo)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	acct := mustAccount(b, s, c, 1)
	holdVia(b, s, acct.ID, "album", kv.Blob{Hash: hexHash('c'), Size: 1 << 20})
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range writers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				op := &kv.Op{
					AlbumID: "album", AssetID: fmt.Sprintf("asset-%d", i), Action: kv.OpCreate, ProtocolVersion: "2026-09-01",
					CreatedByUser: acct.ID, CiphertextHash: hexHash('c'),
					Manifest: kv.Blob{Hash: fmt.Sprintf("%064x", i), Size: 600},
				}
				if _, err := s.ApplyOp(acct.ID, op); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}
