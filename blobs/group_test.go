package blobs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"sealbox/blobs"
)

func TestPutSmallConcurrent(t *testing.T) {
	const callers = 64
	s := MustOpenStore(t)
	shared := []byte("a manifest every caller stores")
	var want []string
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range callers {
		own := fmt.Appendf(nil, "metadata of caller %d", i)
		want = append(want, hashOf(own))
		wg.Go(func() {
			<-start
			if err := s.PutSmall(shared, own); err != nil {
				t.Error(err)
			}
		})
	}
	close(start)
	wg.Wait()
	want = append(want, hashOf(shared))

	var paths []string
	for _, h := range want {
		paths = append(paths, filepath.Join(h[0:2], h[2:4], h))
		if err := s.Verify(h); err != nil {
			t.Errorf("Verify(%s) = %v, want nil", h, err)
		}
	}
	slices.Sort(paths)
	// Exactly the blobs, each once, and no temp file left behind.
	if got := files(t, s.Path()); !slices.Equal(got, paths) {
		t.Errorf("files = %q, want %q", got, paths)
	}
}

func TestPutSmallExistingNeverRewritten(t *testing.T) {
	s := MustOpenStore(t)
	data := []byte("stored once")
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	p, before := backdatedBlob(t, s, data, old)
	if err := s.PutSmall(data); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Errorf("blob file was replaced (inode changed)")
	}
	// Claimed, as by Put, so gc keeps a blob an op is about to record.
	if !after.ModTime().After(old) {
		t.Errorf("ModTime = %v, want a claim after %v", after.ModTime(), old)
	}
	if got := files(t, s.Path()); len(got) != 1 {
		t.Errorf("files = %q, want the blob alone", got)
	}
}

func TestPutSmallFailureStoresNothing(t *testing.T) {
	s := MustOpenStore(t)
	// Without its temp directory the store cannot write a byte.
	if err := os.RemoveAll(filepath.Join(s.Path(), "tmp")); err != nil {
		t.Fatal(err)
	}
	data := []byte("never stored")
	if err := s.PutSmall(data); err == nil {
		t.Fatal("PutSmall = nil, want an error")
	}
	if _, err := s.Stat(hashOf(data)); err != blobs.ErrNotFound {
		t.Errorf("Stat = %v, want ErrNotFound", err)
	}
}

// benchSmallPuts stores two distinct small blobs per call from 64
// goroutines, as 64 concurrent lifecycle ops do.
func benchSmallPuts(b *testing.B, put func(s *blobs.Dir, manifest, metadata []byte) error) {
	s := MustOpenStore(b)
	var next sync.Mutex
	i := 0
	b.SetParallelism(32) // 64 goroutines on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			next.Lock()
			i++
			n := i
			next.Unlock()
			if err := put(s, fmt.Appendf(nil, "manifest %d", n), fmt.Appendf(nil, "metadata %d", n)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}

// BenchmarkPutSmallParallel: the group commit. Compare with
// BenchmarkPutBytesParallel, the same blobs each with its own fsyncs.
func BenchmarkPutSmallParallel(b *testing.B) {
	benchSmallPuts(b, func(s *blobs.Dir, manifest, metadata []byte) error {
		return s.PutSmall(manifest, metadata)
	})
}

func BenchmarkPutBytesParallel(b *testing.B) {
	benchSmallPuts(b, func(s *blobs.Dir, manifest, metadata []byte) error {
		if _, _, err := s.PutBytes(manifest); err != nil {
			return err
		}
		_, _, err := s.PutBytes(metadata)
		return err
	})
}
