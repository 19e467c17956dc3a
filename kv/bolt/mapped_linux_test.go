package bolt_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	sbolt "sealbox/kv/bolt"
	"sealbox/kv/engine"
)

// fileResident is the process's file-backed resident memory in bytes
// (/proc/self/statm's third field), the figure MappedBudget bounds.
func fileResident(t *testing.T) int64 {
	t.Helper()
	statm, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Fatal(err)
	}
	pages, err := strconv.ParseInt(string(bytes.Fields(statm)[2]), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return pages * int64(os.Getpagesize())
}

// TestMappedBudget hashes every value of a 128 MiB store, which maps all of
// it into the process: without a budget the pages stay resident; with a
// 32 MiB budget the watcher drops them, so the file-backed resident memory
// sampled during the scan stays near the budget and falls under it after.
func TestMappedBudget(t *testing.T) {
	const fileSize = 128 << 20
	path := filepath.Join(t.TempDir(), "big.db")
	fill, err := sbolt.Open(path, sbolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := fill.CreateBuckets([][]byte{[]byte("values")}); err != nil {
		t.Fatal(err)
	}
	value := bytes.Repeat([]byte{'v'}, 8<<10)
	for batch := range fileSize / len(value) / 1024 {
		err := fill.Update(func(tx engine.Tx) error {
			for i := range 1024 {
				key := binary.BigEndian.AppendUint64(nil, uint64(batch*1024+i))
				if err := tx.Bucket([]byte("values")).Put(key, value); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := fill.Close(); err != nil {
		t.Fatal(err)
	}
	const budget = 32 << 20
	for _, tc := range []struct {
		name   string
		budget int64
		check  func(t *testing.T, before, peak int64)
	}{
		{"no budget", 0, func(t *testing.T, before, _ int64) {
			if grew := fileResident(t) - before; grew < fileSize/2 {
				t.Fatalf("without a budget the scan left %d MiB more resident, want about the file's %d MiB", grew>>20, fileSize>>20)
			}
		}},
		{"32 MiB budget", budget, func(t *testing.T, before, peak int64) {
			t.Logf("peak %d MiB more resident than before", (peak-before)>>20)
			if grew := peak - before; grew > fileSize/2 {
				t.Fatalf("with a %d MiB budget the scan peaked at %d MiB more resident than before, half the file or more", budget>>20, grew>>20)
			}
			// The watcher looks every millisecond: wait for it to act once more.
			deadline := time.Now().Add(5 * time.Second)
			for fileResident(t)-before > budget {
				if time.Now().After(deadline) {
					t.Fatalf("with a %d MiB budget %d MiB more than before stayed resident after the scan", budget>>20, (fileResident(t)-before)>>20)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := sbolt.Open(path, sbolt.Options{ReadOnly: true, MappedBudget: tc.budget})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			before := fileResident(t)
			peak := before
			var read int
			err = e.View(func(tx engine.Tx) error {
				return tx.Bucket([]byte("values")).Scan(engine.Range{To: []byte{0xff}}, func(_, v []byte) error {
					// Hash each value, as check --deep does with inline blobs:
					// the watcher keeps up with a scan that works on what it reads.
					sha256.Sum256(v)
					read += len(v)
					if read%(1<<20) == 0 {
						peak = max(peak, fileResident(t))
					}
					return nil
				})
			})
			if err != nil {
				t.Fatal(err)
			}
			if read < fileSize {
				t.Fatalf("read %d bytes, want %d", read, fileSize)
			}
			tc.check(t, before, peak)
		})
	}
}
