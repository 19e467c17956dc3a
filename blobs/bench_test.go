package blobs_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"testing"
)

// BenchmarkPut64MiB and BenchmarkRawCopyFsync64MiB write the same bytes; the
// ratio of their throughputs is the cost of Put over a bare durable write
// (hashing, link, directory fsync).
const benchSize = 64 << 20

func BenchmarkPut64MiB(b *testing.B) {
	s := MustOpenStore(b)
	data := randomBytes(benchSize, 9)
	b.SetBytes(benchSize)
	b.ReportAllocs()
	var i uint64
	for b.Loop() {
		i++
		binary.BigEndian.PutUint64(data, i) // a new blob each time, so every Put writes
		info, created, err := s.Put(bytes.NewReader(data), "", 0)
		if err != nil || !created {
			b.Fatalf("Put: created = %v, err = %v", created, err)
		}
		b.StopTimer()
		if err := s.Remove(info.Hash); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

func BenchmarkRawCopyFsync64MiB(b *testing.B) {
	dir := b.TempDir()
	data := randomBytes(benchSize, 9)
	b.SetBytes(benchSize)
	b.ReportAllocs()
	var i uint64
	for b.Loop() {
		i++
		binary.BigEndian.PutUint64(data, i)
		f, err := os.CreateTemp(dir, "raw-*")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(f, bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := os.Remove(f.Name()); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
