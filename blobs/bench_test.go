package blobs_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"testing"
)

// BenchmarkPut64MiB and BenchmarkRawCopyFsync64MiB write the same bytes; the
// ratio of their throughputs is the cost of Put over a bare durable write
// (hashing, link, directory fsync).
const benchSize = 64 << 20

// benchWrites runs write once per iteration on benchSize bytes that differ
// from every earlier iteration's (a new blob each time, so every Put
// writes), and runs cleanup, untimed, on what write returned.
func benchWrites(b *testing.B, write func(data []byte) (string, error), cleanup func(string) error) {
	data := randomBytes(benchSize, 9)
	b.SetBytes(benchSize)
	b.ReportAllocs()
	var i uint64
	for b.Loop() {
		i++
		binary.BigEndian.PutUint64(data, i)
		written, err := write(data)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := cleanup(written); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

func BenchmarkPut64MiB(b *testing.B) {
	s := MustOpenStore(b)
	benchWrites(b, func(data []byte) (string, error) {
		info, created, err := s.Put(bytes.NewReader(data), "", 0)
		if err == nil && !created {
			err = fmt.Errorf("Put created nothing")
		}
		return info.Hash, err
	}, s.Remove)
}

// BenchmarkRawCopyFsync64MiB is BenchmarkPut64MiB's baseline: the same
// bytes copied to a temp file and fsynced, with nothing else.
func BenchmarkRawCopyFsync64MiB(b *testing.B) {
	dir := b.TempDir()
	benchWrites(b, func(data []byte) (string, error) {
		f, err := os.CreateTemp(dir, "raw-*")
		if err != nil {
			return "", err
		}
		defer f.Close()
		if _, err := io.Copy(f, bytes.NewReader(data)); err != nil {
			return "", err
		}
		return f.Name(), f.Sync()
	}, os.Remove)
}
