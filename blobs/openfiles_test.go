package blobs_test

import (
	"io"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"sealbox/blobs"
)

// fdOf returns the descriptor behind a handle from Open.
func fdOf(t *testing.T, r io.ReadSeekCloser) uintptr {
	t.Helper()
	f, ok := r.(interface{ Fd() uintptr })
	if !ok {
		t.Fatalf("Open returned %T, which has no Fd", r)
	}
	return f.Fd()
}

func TestOpenReusesHandleFromStart(t *testing.T) {
	s := MustOpenStore(t)
	data := randomBytes(10000, 11)
	info, _, err := s.PutBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	first, _, err := s.Open(info.Hash)
	if err != nil {
		t.Fatal(err)
	}
	fd := fdOf(t, first)
	if _, err := first.Seek(5000, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	first.Close()

	again, got, err := s.Open(info.Hash)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if fdOf(t, again) != fd {
		t.Errorf("a second Open opened the file again instead of reusing the idle handle")
	}
	if got.Size != int64(len(data)) || got.Hash != info.Hash {
		t.Errorf("Info = %+v, want the blob's", got)
	}
	// The reused handle starts at the first byte whatever its last reader did.
	if b, _ := io.ReadAll(again); string(b) != string(data) {
		t.Errorf("read %d bytes, want the blob's %d", len(b), len(data))
	}
}

func TestOpenConcurrentReadersGetOwnHandles(t *testing.T) {
	s := MustOpenStore(t)
	data := randomBytes(1<<16, 12)
	info, _, err := s.PutBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 50 {
				f, _, err := s.Open(info.Hash)
				if err != nil {
					t.Error(err)
					return
				}
				b, err := io.ReadAll(f)
				f.Close()
				if err != nil || string(b) != string(data) {
					t.Errorf("read %d bytes (%v), want the blob's %d", len(b), err, len(data))
					return
				}
			}
		})
	}
	wg.Wait()
}

// removedHandleClosed reports whether fd no longer names the blob's file
// (closed, or reused by an unrelated open).
func removedHandleClosed(fd uintptr, was os.FileInfo) bool {
	fi, err := os.Stat("/proc/self/fd/" + itoa(fd))
	return err != nil || !os.SameFile(fi, was)
}

func itoa(u uintptr) string {
	if u == 0 {
		return "0"
	}
	var b []byte
	for ; u > 0; u /= 10 {
		b = append([]byte{byte('0' + u%10)}, b...)
	}
	return string(b)
}

func TestRemoveClosesHandles(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("needs /proc/self/fd")
	}
	for _, remove := range []struct {
		name string
		fn   func(s *blobs.Dir, hash string) error
	}{
		{"Remove", func(s *blobs.Dir, hash string) error { return s.Remove(hash) }},
		{"Collect", func(s *blobs.Dir, hash string) error {
			collected, err := s.Collect(hash, time.Now().Add(time.Hour))
			if err == nil && !collected {
				t.Errorf("Collect kept the blob")
			}
			return err
		}},
	} {
		t.Run(remove.name, func(t *testing.T) {
			s := MustOpenStore(t)
			idle, _, _ := s.PutBytes([]byte("idle handle"))
			busy, _, _ := s.PutBytes([]byte("busy handle"))
			f, _, err := s.Open(idle.Hash)
			if err != nil {
				t.Fatal(err)
			}
			idleFd := fdOf(t, f)
			idleFile, _ := os.Stat("/proc/self/fd/" + itoa(idleFd))
			f.Close() // now idle in the pool
			inUse, _, err := s.Open(busy.Hash)
			if err != nil {
				t.Fatal(err)
			}
			busyFd := fdOf(t, inUse)
			busyFile, _ := os.Stat("/proc/self/fd/" + itoa(busyFd))

			if err := remove.fn(s, idle.Hash); err != nil {
				t.Fatal(err)
			}
			if !removedHandleClosed(idleFd, idleFile) {
				t.Errorf("the removed blob's idle handle is still open: its disk space is not freed")
			}
			if _, _, err := s.Open(idle.Hash); err != blobs.ErrNotFound {
				t.Errorf("Open of the removed blob = %v, want ErrNotFound", err)
			}
			// A handle in use during a removal is closed when its reader is
			// done, not kept.
			if err := remove.fn(s, busy.Hash); err != nil {
				t.Fatal(err)
			}
			inUse.Close()
			if !removedHandleClosed(busyFd, busyFile) {
				t.Errorf("a handle in use during the removal went back to the pool")
			}
		})
	}
}

// TestCloseTwiceKeepsOneReaderPerHandle: a second Close of a handle must not
// put it in the pool twice, where two readers would share its offset.
func TestCloseTwiceKeepsOneReaderPerHandle(t *testing.T) {
	s := MustOpenStore(t)
	info, _, err := s.PutBytes(randomBytes(1000, 13))
	if err != nil {
		t.Fatal(err)
	}
	f, _, err := s.Open(info.Hash)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err == nil {
		t.Error("a second Close = nil, want an error")
	}
	a, _, err := s.Open(info.Hash)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, _, err := s.Open(info.Hash)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if fdOf(t, a) == fdOf(t, b) {
		t.Error("two readers got the same handle")
	}
}

// TestIdleHandlesAreBounded: the pool keeps at most 256 idle handles and,
// beyond, closes the one returned longest ago; taking a handle out and
// returning it makes it the most recent.
func TestIdleHandlesAreBounded(t *testing.T) {
	const max = 256
	s := MustOpenStore(t)
	var handles []io.ReadSeekCloser // of blob i, returned to the pool
	blob := func(i int) []byte { return []byte("blob " + strconv.Itoa(i)) }
	readBlob := func(i int) {
		t.Helper()
		info, _, err := s.PutBytes(blob(i))
		if err != nil {
			t.Fatal(err)
		}
		r, _, err := s.Open(info.Hash)
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
		handles = append(handles, r)
	}
	for i := range max {
		readBlob(i)
	}
	// Blob 0's handle is taken and returned again: blob 1's is the oldest.
	info, _, _ := s.PutBytes(blob(0))
	r, _, err := s.Open(info.Hash)
	if err != nil || fdOf(t, r) != fdOf(t, handles[0]) {
		t.Fatalf("blob 0 was not read through its idle handle (%v)", err)
	}
	r.Close()
	readBlob(max)
	readBlob(max + 1)
	const closed = ^uintptr(0) // os.File.Fd of a closed file
	for i, h := range handles {
		if got, want := fdOf(t, h) == closed, i == 1 || i == 2; got != want {
			t.Errorf("blob %d's idle handle: closed %v, want %v", i, got, want)
		}
	}
}
