package blobs_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"sealbox/blobs"
)

// MustOpenStore opens a Dir in a fresh temp dir.
func MustOpenStore(tb testing.TB) *blobs.Dir {
	tb.Helper()
	s, err := blobs.Open(filepath.Join(tb.TempDir(), "blobs"))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func hashOf(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// randomBytes returns n deterministic pseudo-random bytes with a run of zero
// bytes in the middle.
func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{byte(seed)}).Read(b)
	clear(b[n/3 : n/2])
	return b
}

// files lists every non-directory under dir (tmp/ included), relative to dir.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		out = append(out, rel)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestOpenCreatesDirs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data", "blobs")
	s, err := blobs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Path(), dir; got != want {
		t.Errorf("Dir() = %q, want %q", got, want)
	}
	for _, d := range []string{dir, filepath.Join(dir, "tmp")} {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := fi.Mode(), fs.ModeDir|0o700; got != want {
			t.Errorf("mode of %s = %v, want %v", d, got, want)
		}
	}
}

// TestOpenReadOnlyCreatesNothing: a read-only store reads what an ordinary
// one wrote, and on a missing directory reports every blob missing without
// creating the directory.
func TestOpenReadOnlyCreatesNothing(t *testing.T) {
	s := MustOpenStore(t)
	info, _, err := s.PutBytes([]byte("stored"))
	if err != nil {
		t.Fatal(err)
	}
	ro := blobs.OpenReadOnly(s.Path())
	if got, err := ro.Stat(info.Hash); err != nil || got.Size != info.Size {
		t.Fatalf("Stat through the read-only store: %+v, %v", got, err)
	}
	if err := ro.Verify(info.Hash); err != nil {
		t.Fatalf("Verify through the read-only store: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "blobs")
	if _, err := blobs.OpenReadOnly(missing).Stat(info.Hash); !errors.Is(err, blobs.ErrNotFound) {
		t.Fatalf("Stat in a missing directory: got %v, want ErrNotFound", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("OpenReadOnly created the directory")
	}
}

func TestPutRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"empty", []byte{}},
		{"one zero byte", []byte{0}},
		{"4KiB random", randomBytes(4<<10, 1)},
		{"1MiB+1 random", randomBytes(1<<20+1, 2)}, // spans two copy buffers
		{"3MiB zeros", make([]byte, 3<<20)},
	} {
		for _, mode := range []string{"hash computed", "hash checked"} {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				s := MustOpenStore(t)
				h := hashOf(tc.data)
				want := ""
				if mode == "hash checked" {
					want = h
				}
				info, created, err := s.Put(bytes.NewReader(tc.data), want, 0)
				if err != nil {
					t.Fatal(err)
				}
				if !created {
					t.Errorf("created = false, want true")
				}
				if got, want := info.Hash, h; got != want {
					t.Errorf("Hash = %s, want %s", got, want)
				}
				if got, want := info.Size, int64(len(tc.data)); got != want {
					t.Errorf("Size = %d, want %d", got, want)
				}
				if got, want := files(t, s.Path()), []string{filepath.Join(h[0:2], h[2:4], h)}; !slices.Equal(got, want) {
					t.Errorf("files = %q, want %q", got, want)
				}

				f, openInfo, err := s.Open(h)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if got, want := openInfo, info; got != want {
					t.Errorf("Open info = %+v, want %+v", got, want)
				}
				got, err := io.ReadAll(f)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, tc.data) {
					t.Errorf("read back %d bytes that differ from the %d put", len(got), len(tc.data))
				}
				if err := s.Verify(h); err != nil {
					t.Errorf("Verify = %v, want nil", err)
				}
			})
		}
	}
}

func TestPutBytes(t *testing.T) {
	s := MustOpenStore(t)
	data := []byte("manifest")
	for i, wantCreated := range []bool{true, false} {
		info, created, err := s.PutBytes(data)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := info.Hash, hashOf(data); got != want {
			t.Errorf("put %d: Hash = %s, want %s", i, got, want)
		}
		if got, want := created, wantCreated; got != want {
			t.Errorf("put %d: created = %v, want %v", i, got, want)
		}
	}
}

func TestPutHashMismatchLeavesNothing(t *testing.T) {
	other := []byte("other bytes")
	for _, tc := range []struct {
		name        string
		otherStored bool // the blob named by want is already stored
	}{
		{"want absent", false},
		{"want present", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := MustOpenStore(t)
			var before []string
			if tc.otherStored {
				if _, _, err := s.PutBytes(other); err != nil {
					t.Fatal(err)
				}
				before = files(t, s.Path())
			}
			_, _, err := s.Put(bytes.NewReader(randomBytes(1<<20, 3)), hashOf(other), 0)
			if got, want := err, blobs.ErrHashMismatch; !errors.Is(got, want) {
				t.Fatalf("err = %v, want %v", got, want)
			}
			if got, want := files(t, s.Path()), before; !slices.Equal(got, want) {
				t.Errorf("files = %q, want %q", got, want)
			}
		})
	}
}

func TestPutMaxSize(t *testing.T) {
	for _, tc := range []struct {
		name    string
		size    int
		maxSize int64
		wantErr error
	}{
		{"exactly max", 10, 10, nil},
		{"one over max", 11, 10, blobs.ErrTooLarge},
		{"far over max", 3 << 20, 1 << 20, blobs.ErrTooLarge},
		{"zero is unlimited", 3 << 20, 0, nil},
		{"negative is unlimited", 3 << 20, -1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := MustOpenStore(t)
			_, _, err := s.Put(bytes.NewReader(randomBytes(tc.size, 4)), "", tc.maxSize)
			if got, want := err, tc.wantErr; !errors.Is(got, want) {
				t.Fatalf("err = %v, want %v", got, want)
			}
			wantFiles := 1
			if tc.wantErr != nil {
				wantFiles = 0
			}
			if got, want := len(files(t, s.Path())), wantFiles; got != want {
				t.Errorf("%d files left in the store, want %d", got, want)
			}
		})
	}
}

func TestPutReaderErrorLeavesNothing(t *testing.T) {
	s := MustOpenStore(t)
	boom := errors.New("connection reset")
	r := io.MultiReader(bytes.NewReader(randomBytes(3<<20, 5)), iotest.ErrReader(boom))
	_, _, err := s.Put(r, "", 0)
	if got, want := err, boom; !errors.Is(got, want) {
		t.Fatalf("err = %v, want %v", got, want)
	}
	if got := files(t, s.Path()); len(got) != 0 {
		t.Errorf("files = %q, want none", got)
	}
}

// backdatedBlob stores data and sets its file's times to old, so a rewrite
// or a claim within the same clock tick would show. It returns the file's
// path and what Stat said of it then.
func backdatedBlob(t *testing.T, s *blobs.Dir, data []byte, old time.Time) (string, os.FileInfo) {
	t.Helper()
	first, _, err := s.PutBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(s.Path(), first.Hash[0:2], first.Hash[2:4], first.Hash)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return p, before
}

func TestPutExistingNeverRewritten(t *testing.T) {
	s := MustOpenStore(t)
	data := randomBytes(64<<10, 6)
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	p, before := backdatedBlob(t, s, data, old)

	info, created, err := s.Put(bytes.NewReader(data), hashOf(data), 0)
	if err != nil {
		t.Fatal(err)
	}
	if created {
		t.Errorf("created = true, want false")
	}
	// A Put of bytes already stored claims the file: its mtime moves forward
	// so garbage collection keeps it, while its bytes and inode stay.
	if !info.ModTime.After(old) {
		t.Errorf("ModTime = %v, want a claim after %v", info.ModTime, old)
	}
	after, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Errorf("blob file was replaced (inode changed)")
	}
	if got, _ := os.ReadFile(p); !bytes.Equal(got, data) {
		t.Errorf("blob bytes changed")
	}
	if got, want := len(files(t, s.Path())), 1; got != want {
		t.Errorf("%d files, want %d (temp file left behind?)", got, want)
	}
}

func TestPutConcurrentSameBlob(t *testing.T) {
	const writers = 32
	s := MustOpenStore(t)
	data := randomBytes(1<<20, 7)
	h := hashOf(data)

	start := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := 0
	for range writers {
		wg.Go(func() {
			<-start
			info, c, err := s.Put(bytes.NewReader(data), h, 0)
			if err != nil {
				t.Error(err)
				return
			}
			if got, want := info.Hash, h; got != want {
				t.Errorf("Hash = %s, want %s", got, want)
			}
			if c {
				mu.Lock()
				created++
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()

	if got, want := created, 1; got != want {
		t.Errorf("%d Puts reported created, want %d", got, want)
	}
	if got, want := files(t, s.Path()), []string{filepath.Join(h[0:2], h[2:4], h)}; !slices.Equal(got, want) {
		t.Errorf("files = %q, want %q", got, want)
	}
	if err := s.Verify(h); err != nil {
		t.Errorf("Verify = %v, want nil", err)
	}
}

// TestPutConstantMemory checks that Put streams: storing 32 MiB allocates far
// less than 32 MiB.
func TestPutConstantMemory(t *testing.T) {
	const size = 32 << 20
	s := MustOpenStore(t)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, _, err := s.Put(io.LimitReader(&counter{}, size), "", 0); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(4<<20); got > limit {
		t.Errorf("Put of %d bytes allocated %d bytes, want at most %d", size, got, limit)
	}
}

// counter is an endless reader of 0, 1, 2, ... 255, 0, 1, ...
type counter struct{ n byte }

func (c *counter) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = c.n
		c.n++
	}
	return len(p), nil
}

func TestWalk(t *testing.T) {
	s := MustOpenStore(t)
	want := map[string]int64{}
	for i := range 20 {
		info, _, err := s.PutBytes(randomBytes(100+i, uint64(i)))
		if err != nil {
			t.Fatal(err)
		}
		want[info.Hash] = info.Size
	}

	// Files Walk must skip.
	stray := hashOf([]byte("stray"))
	if stray[0:4] == "0000" {
		t.Fatal("stray hash belongs in 00/00; pick other bytes")
	}
	some := slices.Sorted(maps.Keys(want))[0]
	// unstored has the fan-out dirs of some but is not stored.
	unstored := some[:63] + string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", some[63])+1)%16])
	junk := map[string]string{
		filepath.Join("tmp", "put-123"):                    "a temp file",
		"README":                                           "a file at the top",
		filepath.Join("zz", "zz", "f"):                     "a dir that is not a fan-out dir",
		filepath.Join("00", "00", stray):                   "a valid hash in the wrong fan-out dir",
		filepath.Join(some[0:2], some[2:4], "notes.txt"):   "a name that is not a hash",
		filepath.Join(some[0:2], some[2:4], some[:63]+"A"): "an uppercase hex name",
		filepath.Join(some[0:2], some[2:4], unstored, "f"): "a directory named like a hash",
	}
	for name := range junk {
		p := filepath.Join(s.Path(), name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("junk"), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	got := map[string]int64{}
	var order []string
	err := s.Walk(func(info blobs.Info) error {
		got[info.Hash] = info.Size
		order = append(order, info.Hash)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || len(order) != len(want) {
		t.Errorf("Walk visited %d blobs (%d distinct), want %d", len(order), len(got), len(want))
	}
	for h, size := range want {
		if got[h] != size {
			t.Errorf("blob %s: visited with size %d, want %d", h, got[h], size)
		}
	}
	if !slices.IsSorted(order) {
		t.Errorf("Walk order is not hash order: %q", order)
	}

	stop := errors.New("stop")
	calls := 0
	err = s.Walk(func(blobs.Info) error { calls++; return stop })
	if got, want := err, stop; !errors.Is(got, want) {
		t.Errorf("Walk err = %v, want %v", got, want)
	}
	if got, want := calls, 1; got != want {
		t.Errorf("fn called %d times after returning an error, want %d", got, want)
	}
}

func TestVerifyDetectsCorruption(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(f *os.File) error
	}{
		{"byte changed", func(f *os.File) error { _, err := f.WriteAt([]byte{0xff}, 2000); return err }},
		{"truncated", func(f *os.File) error { return f.Truncate(100) }},
		{"extended", func(f *os.File) error { _, err := f.WriteAt([]byte{0}, 4096); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := MustOpenStore(t)
			info, _, err := s.PutBytes(randomBytes(4096, 8)) // byte 2000 is in the zero run
			if err != nil {
				t.Fatal(err)
			}
			h := info.Hash
			f, err := os.OpenFile(filepath.Join(s.Path(), h[0:2], h[2:4], h), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.corrupt(f); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if got, want := s.Verify(h), blobs.ErrCorrupt; !errors.Is(got, want) {
				t.Errorf("Verify = %v, want %v", got, want)
			}
		})
	}
}

func TestRemove(t *testing.T) {
	s := MustOpenStore(t)
	info, _, err := s.PutBytes([]byte("garbage"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(info.Hash); err != nil {
		t.Fatal(err)
	}
	if s.Exists(info.Hash) {
		t.Errorf("Exists after Remove = true, want false")
	}
	if got, want := s.Remove(info.Hash), blobs.ErrNotFound; !errors.Is(got, want) {
		t.Errorf("second Remove = %v, want %v", got, want)
	}
	if _, created, err := s.PutBytes([]byte("garbage")); err != nil || !created {
		t.Errorf("Put after Remove: created = %v, err = %v; want true, nil", created, err)
	}
}

// byHash runs each hash-taking method of Dir and returns its error.
var byHash = map[string]func(s *blobs.Dir, h string) error{
	"Open": func(s *blobs.Dir, h string) error {
		f, _, err := s.Open(h)
		if err == nil {
			f.Close()
		}
		return err
	},
	"Stat":   func(s *blobs.Dir, h string) error { _, err := s.Stat(h); return err },
	"Remove": func(s *blobs.Dir, h string) error { return s.Remove(h) },
	"Verify": func(s *blobs.Dir, h string) error { return s.Verify(h) },
}

func TestInvalidHash(t *testing.T) {
	valid := hashOf([]byte("x"))
	s := MustOpenStore(t)
	for _, h := range []string{
		"",
		"abc",
		valid[:63],
		valid + "0",
		"ABCDEF" + valid[6:],
		"g" + valid[1:],
		"../../../../../../../../etc/passwd" + valid[34:],
		valid[:62] + "/x",
	} {
		for name, call := range byHash {
			if got, want := call(s, h), blobs.ErrInvalidHash; !errors.Is(got, want) {
				t.Errorf("%s(%q) = %v, want %v", name, h, got, want)
			}
		}
		if s.Exists(h) {
			t.Errorf("Exists(%q) = true, want false", h)
		}
		if _, _, err := s.Put(bytes.NewReader(nil), h, 0); h != "" && !errors.Is(err, blobs.ErrInvalidHash) {
			t.Errorf("Put(want %q) = %v, want %v", h, err, blobs.ErrInvalidHash)
		}
	}
}

func TestNotFound(t *testing.T) {
	s := MustOpenStore(t)
	h := hashOf([]byte("never stored"))
	for name, call := range byHash {
		if got, want := call(s, h), blobs.ErrNotFound; !errors.Is(got, want) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if s.Exists(h) {
		t.Errorf("Exists = true, want false")
	}
}

func TestCleanTemp(t *testing.T) {
	s := MustOpenStore(t)
	now := time.Now()
	tmp := filepath.Join(s.Path(), "tmp")
	for name, age := range map[string]time.Duration{
		"put-old1":  2 * time.Hour,
		"put-old2":  25 * time.Hour,
		"put-fresh": time.Minute,
	} {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.PutBytes([]byte("kept")); err != nil {
		t.Fatal(err)
	}

	h := hashOf([]byte("kept"))
	before := files(t, s.Path())
	if stale, err := s.StaleTemp(now.Add(-time.Hour)); err != nil || stale != 2 {
		t.Fatalf("StaleTemp = %d, %v; want 2", stale, err)
	}
	if got := files(t, s.Path()); !slices.Equal(got, before) {
		t.Fatalf("StaleTemp removed files: %q, was %q", got, before)
	}
	removed, err := s.CleanTemp(now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := removed, 2; got != want {
		t.Errorf("removed = %d, want %d", got, want)
	}
	want := []string{filepath.Join(h[0:2], h[2:4], h), filepath.Join("tmp", "put-fresh")}
	if got := files(t, s.Path()); !slices.Equal(got, want) {
		t.Errorf("files = %q, want %q", got, want)
	}
}

func TestCheckWritable(t *testing.T) {
	s := MustOpenStore(t)
	if err := s.CheckWritable(); err != nil {
		t.Fatal(err)
	}
	if got := files(t, s.Path()); len(got) != 0 {
		t.Fatalf("the check left files: %q", got)
	}
	// A temp dir that is not a directory refuses even root, whom modes do
	// not stop.
	tmp := filepath.Join(s.Path(), "tmp")
	if err := os.Remove(tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmp, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckWritable(); err == nil {
		t.Fatal("no error with tmp not a directory")
	}
}

func TestCollect(t *testing.T) {
	s := MustOpenStore(t)
	info, _, err := s.PutBytes(randomBytes(1000, 9))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(s.Path(), info.Hash[0:2], info.Hash[2:4], info.Hash)
	cutoff := time.Now().Add(-time.Hour)
	if removed, err := s.Collect(info.Hash, cutoff); err != nil || removed {
		t.Fatalf("a fresh blob was collected: %v %v", removed, err)
	}
	old := cutoff.Add(-time.Hour)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	// A Put of the same bytes claims it: not collected.
	if _, _, err := s.PutBytes(randomBytes(1000, 9)); err != nil {
		t.Fatal(err)
	}
	if removed, err := s.Collect(info.Hash, cutoff); err != nil || removed {
		t.Fatalf("a claimed blob was collected: %v %v", removed, err)
	}
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	if removed, err := s.Collect(info.Hash, cutoff); err != nil || !removed {
		t.Fatalf("a stale blob was kept: %v %v", removed, err)
	}
	if got := files(t, s.Path()); len(got) != 0 {
		t.Fatalf("left behind: %v", got)
	}
	if _, err := s.Collect(info.Hash, cutoff); err != blobs.ErrNotFound {
		t.Fatalf("second collect: %v", err)
	}
}

// Collect racing Puts of the same bytes: whatever interleaving, after every
// Put has returned the blob is on disk and whole.
func TestCollectRacingPut(t *testing.T) {
	s := MustOpenStore(t)
	data := randomBytes(4096, 11)
	info, _, err := s.PutBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(s.Path(), info.Hash[0:2], info.Hash[2:4], info.Hash)
	for i := 0; i < 200; i++ {
		old := time.Now().Add(-2 * time.Hour)
		os.Chtimes(p, old, old)
		done := make(chan error, 1)
		go func() {
			_, _, err := s.PutBytes(data)
			done <- err
		}()
		if _, err := s.Collect(info.Hash, time.Now().Add(-time.Hour)); err != nil && err != blobs.ErrNotFound {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := s.Verify(info.Hash); err != nil {
			t.Fatalf("round %d: the blob a Put reported stored is gone: %v", i, err)
		}
	}
}

// writePartial writes data to a file in a directory of its own under the
// store, as a resumable upload does, and returns its path.
func writePartial(t *testing.T, s *blobs.Dir, name string, data []byte) string {
	t.Helper()
	dir := filepath.Join(s.Path(), "partial")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAdopt(t *testing.T) {
	s := MustOpenStore(t)
	data := randomBytes(3<<20, 11)
	h := hashOf(data)
	src := writePartial(t, s, "upload-1", data)
	info, created, err := s.Adopt(src, h)
	if err != nil {
		t.Fatal(err)
	}
	if !created || info.Hash != h || info.Size != int64(len(data)) {
		t.Fatalf("Adopt = %+v, created %v", info, created)
	}
	// The blob is the same file under a second name, not a copy; the
	// caller's name stays until the caller removes it.
	srcFi, err := os.Stat(src)
	if err != nil {
		t.Fatalf("Adopt removed the caller's name: %v", err)
	}
	f, _, err := s.Open(h)
	if err != nil {
		t.Fatal(err)
	}
	// Locally a blob is read through a file's descriptor, which net/http
	// sends with sendfile: net.TCPConn.ReadFrom takes any syscall.Conn.
	file, ok := f.(interface {
		syscall.Conn
		Stat() (os.FileInfo, error)
	})
	if !ok {
		t.Fatalf("Open returned %T, which is not a file net/http can sendfile", f)
	}
	blobFi, _ := file.Stat()
	got, _ := io.ReadAll(f)
	f.Close()
	if !os.SameFile(srcFi, blobFi) {
		t.Error("the blob is a copy, not a link of the adopted file")
	}
	if !bytes.Equal(got, data) {
		t.Error("the adopted blob's bytes differ")
	}
	if err := s.Verify(h); err != nil {
		t.Errorf("Verify = %v", err)
	}
	if err := os.Remove(src); err != nil {
		t.Fatal(err)
	}
	if !s.Exists(h) {
		t.Error("removing the caller's name removed the blob")
	}
	var walked []string
	s.Walk(func(i blobs.Info) error { walked = append(walked, i.Hash); return nil })
	if !slices.Equal(walked, []string{h}) {
		t.Errorf("Walk = %q, want only the adopted blob", walked)
	}
}

func TestAdoptExistingNeverRewritten(t *testing.T) {
	s := MustOpenStore(t)
	data := []byte("the stored blob")
	h := hashOf(data)
	if _, _, err := s.PutBytes(data); err != nil {
		t.Fatal(err)
	}
	before, _ := s.Stat(h)
	// Even a caller wrong about its bytes cannot replace a stored blob.
	src := writePartial(t, s, "upload-2", []byte("other bytes of another length"))
	info, created, err := s.Adopt(src, h)
	if err != nil {
		t.Fatal(err)
	}
	// The stored blob is claimed (its mtime moves forward), never replaced.
	if created || info.Hash != before.Hash || info.Size != before.Size || info.ModTime.Before(before.ModTime) {
		t.Fatalf("Adopt over an existing blob: created %v, info %+v, want %+v", created, info, before)
	}
	if err := s.Verify(h); err != nil {
		t.Errorf("the stored blob changed: %v", err)
	}
}

func TestAdoptRefusals(t *testing.T) {
	s := MustOpenStore(t)
	src := writePartial(t, s, "upload-3", []byte("x"))
	if _, _, err := s.Adopt(src, "ABC"); !errors.Is(err, blobs.ErrInvalidHash) {
		t.Errorf("invalid hash: err = %v, want %v", err, blobs.ErrInvalidHash)
	}
	h := hashOf([]byte("never written"))
	if _, _, err := s.Adopt(filepath.Join(s.Path(), "partial", "missing"), h); err == nil {
		t.Error("adopting a missing file succeeded")
	}
	if s.Exists(h) {
		t.Error("a failed Adopt left a blob")
	}
}
