// Package blobstest is the contract every blobs.Engine keeps, as one test
// suite an engine's own test runs against real storage (a temp directory, a
// bucket of a real S3 server): puts that store exactly the declared bytes
// once, reads and ranges, partial uploads that resume at any acknowledged
// offset from another instance, walks, and collection that never removes
// a blob under a concurrent Put that reports success.
package blobstest

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"sealbox/blobs"
)

// Open returns a fresh, empty engine for one subtest, and a function that
// opens another instance on the same storage (another node).
type Open func(t *testing.T) (e blobs.Engine, again func() blobs.Engine)

// MiB is the unit of the partial tests' sizes: they cross 5 MiB, S3's
// smallest part, and the S3 suite runs with 5 MiB parts.
const MiB = 1 << 20

// Run runs the contract against fresh engines from open, one per subtest.
func Run(t *testing.T, open Open) {
	one := func(t *testing.T) blobs.Engine {
		e, _ := open(t)
		return e
	}
	t.Run("put open stat", func(t *testing.T) { testPutOpenStat(t, one(t)) })
	t.Run("wrong hash stores nothing", func(t *testing.T) { testWrongHash(t, one(t)) })
	t.Run("existing never rewritten", func(t *testing.T) { testExisting(t, one(t)) })
	t.Run("too large", func(t *testing.T) { testTooLarge(t, one(t)) })
	t.Run("unknown length body", func(t *testing.T) { testUnknownLength(t, one(t)) })
	t.Run("put small", func(t *testing.T) { testPutSmall(t, one(t)) })
	t.Run("ranges", func(t *testing.T) { testRanges(t, one(t)) })
	t.Run("partial resumes on another instance", func(t *testing.T) { testPartial(t, open) })
	t.Run("partial short", func(t *testing.T) { testPartialShort(t, one(t)) })
	t.Run("partial complete of a stored blob", func(t *testing.T) { testPartialExisting(t, one(t)) })
	t.Run("partial completed again after a crash", func(t *testing.T) { testPartialCompletedAgain(t, open) })
	t.Run("remove", func(t *testing.T) { testRemove(t, one(t)) })
	t.Run("stale partials", func(t *testing.T) { testStalePartials(t, one(t)) })
	t.Run("walk", func(t *testing.T) { testWalk(t, one(t)) })
	t.Run("collect", func(t *testing.T) { testCollect(t, one(t)) })
	t.Run("collect races put", func(t *testing.T) { testCollectRacesPut(t, one(t)) })
	t.Run("temp and probe", func(t *testing.T) { testTemp(t, one(t)) })
}

// Bytes returns n deterministic pseudo-random bytes.
func Bytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)}).Read(b)
	return b
}

// onlyReader hides every method but Read: a body of unknown length.
type onlyReader struct{ io.Reader }

func mustPut(t *testing.T, e blobs.Engine, b []byte) blobs.Info {
	t.Helper()
	info, _, err := e.Put(bytes.NewReader(b), blobs.AddressOf(b), 0)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func readAll(t *testing.T, r io.ReadCloser) []byte {
	t.Helper()
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func testPutOpenStat(t *testing.T, e blobs.Engine) {
	for _, size := range []int{0, 1, 1000, 6 * MiB} {
		data := Bytes(size, uint64(size))
		hash := blobs.AddressOf(data)
		info, created, err := e.Put(bytes.NewReader(data), hash, 0)
		if err != nil || !created || info.Hash != hash || info.Size != int64(size) {
			t.Fatalf("Put(%d bytes) = %+v, %v, %v; want created, size %d", size, info, created, err, size)
		}
		f, info, err := e.Open(hash)
		if err != nil || info.Size != int64(size) {
			t.Fatalf("Open = %+v, %v", info, err)
		}
		if got := readAll(t, f); !bytes.Equal(got, data) {
			t.Fatalf("Open read %d bytes, want the %d put", len(got), size)
		}
		f, err = e.OpenSized(hash, int64(size))
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, f); !bytes.Equal(got, data) {
			t.Fatalf("OpenSized read %d bytes, want the %d put", len(got), size)
		}
		if info, err := e.Stat(hash); err != nil || info.Size != int64(size) {
			t.Fatalf("Stat = %+v, %v", info, err)
		}
		if err := e.Verify(hash); err != nil {
			t.Fatalf("Verify = %v", err)
		}
	}
	missing := blobs.AddressOf([]byte("never stored"))
	if _, err := e.Stat(missing); !errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("Stat(missing) = %v, want ErrNotFound", err)
	}
	if _, _, err := e.Open(missing); !errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("Open(missing) = %v, want ErrNotFound", err)
	}
	if _, err := e.Stat("not-a-hash"); !errors.Is(err, blobs.ErrInvalidHash) {
		t.Errorf("Stat(invalid) = %v, want ErrInvalidHash", err)
	}
	if _, _, err := e.Put(bytes.NewReader(nil), "ABC", 0); !errors.Is(err, blobs.ErrInvalidHash) {
		t.Errorf("Put(invalid hash) = %v, want ErrInvalidHash", err)
	}
}

func testWrongHash(t *testing.T, e blobs.Engine) {
	for _, size := range []int{10, 11 * MiB} {
		data := Bytes(size, 7)
		want := blobs.AddressOf([]byte("something else"))
		if _, _, err := e.Put(onlyReader{bytes.NewReader(data)}, want, 0); !errors.Is(err, blobs.ErrHashMismatch) {
			t.Fatalf("Put(%d bytes, wrong hash) = %v, want ErrHashMismatch", size, err)
		}
		for _, h := range []string{want, blobs.AddressOf(data)} {
			if _, err := e.Stat(h); !errors.Is(err, blobs.ErrNotFound) {
				t.Errorf("after a refused Put, Stat(%s) = %v, want ErrNotFound", h, err)
			}
		}
	}
	assertWalk(t, e, nil)
}

func testExisting(t *testing.T, e blobs.Engine) {
	// 3 MiB: one request, large enough that an S3 server may refuse it
	// (412) and close the connection before the body is sent.
	for _, size := range []int{100, 3 * MiB, 11 * MiB} {
		data := Bytes(size, 3)
		first := mustPut(t, e, data)
		info, created, err := e.Put(onlyReader{bytes.NewReader(data)}, first.Hash, 0)
		if err != nil || created || info.Size != first.Size {
			t.Fatalf("second Put(%d bytes) = %+v, %v, %v; want created=false", size, info, created, err)
		}
		f, _, err := e.Open(first.Hash)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(readAll(t, f), data) {
			t.Fatal("the blob changed")
		}
	}
}

func testTooLarge(t *testing.T, e blobs.Engine) {
	for _, size := range []int64{100, 11 * MiB} {
		data := Bytes(int(size), 4)
		hash := blobs.AddressOf(data)
		if _, _, err := e.Put(onlyReader{bytes.NewReader(data)}, hash, size-1); !errors.Is(err, blobs.ErrTooLarge) {
			t.Fatalf("Put(%d bytes, max %d) = %v, want ErrTooLarge", size, size-1, err)
		}
		if _, err := e.Stat(hash); !errors.Is(err, blobs.ErrNotFound) {
			t.Fatalf("a blob too large was stored: %v", err)
		}
		if _, _, err := e.Put(onlyReader{bytes.NewReader(data)}, hash, size); err != nil {
			t.Fatalf("Put(%d bytes, max %d) = %v", size, size, err)
		}
	}
}

func testUnknownLength(t *testing.T, e blobs.Engine) {
	small := Bytes(1234, 5)
	info, created, err := e.Put(onlyReader{bytes.NewReader(small)}, "", 0)
	if err != nil || !created || info.Hash != blobs.AddressOf(small) {
		t.Fatalf("Put(unknown length, no hash) = %+v, %v, %v", info, created, err)
	}
	// Several parts on S3, read in odd-sized pieces.
	big := Bytes(12*MiB+3, 6)
	r := onlyReader{io.MultiReader(bytes.NewReader(big[:7]), bytes.NewReader(big[7:5*MiB+1]), bytes.NewReader(big[5*MiB+1:]))}
	info, created, err = e.Put(r, blobs.AddressOf(big), 0)
	if err != nil || !created || info.Size != int64(len(big)) {
		t.Fatalf("Put(unknown length, %d bytes) = %+v, %v, %v", len(big), info, created, err)
	}
	if err := e.Verify(info.Hash); err != nil {
		t.Fatal(err)
	}
}

// testPutSmall: PutSmall stores what a lifecycle op hands it, a metadata
// blob larger than one S3 part (9 MiB) included.
func testPutSmall(t *testing.T, e blobs.Engine) {
	a, b, large := []byte("manifest"), []byte("metadata"), Bytes(9*MiB, 13)
	if err := e.PutSmall(a, b, large); err != nil {
		t.Fatal(err)
	}
	if err := e.Verify(blobs.AddressOf(large)); err != nil {
		t.Errorf("after PutSmall, Verify(9 MiB) = %v", err)
	}
	for _, data := range [][]byte{a, b, large} {
		if info, err := e.Stat(blobs.AddressOf(data)); err != nil || info.Size != int64(len(data)) {
			t.Errorf("after PutSmall, Stat = %+v, %v", info, err)
		}
	}
}

// rangeReader is the optional interface of a reader that wants to know the
// length of the range it is about to read (the S3 engine's).
type rangeReader interface{ ReadRange(n int64) }

func testRanges(t *testing.T, e blobs.Engine) {
	data := Bytes(3*MiB+17, 8)
	info := mustPut(t, e, data)
	f, err := e.OpenSized(info.Hash, info.Size)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct {
		start, n int64
		hint     bool
	}{
		{0, 1, false}, {0, 10, true}, {MiB - 3, 100, true}, {int64(len(data)) - 5, 5, false},
		{17, 2 * MiB, true}, {2, 3, false}, {int64(len(data)) - 1, 1, true},
	} {
		if _, err := f.Seek(c.start, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		if rr, ok := f.(rangeReader); ok && c.hint {
			rr.ReadRange(c.n)
		}
		got := make([]byte, c.n)
		if _, err := io.ReadFull(f, got); err != nil {
			t.Fatalf("range %d+%d: %v", c.start, c.n, err)
		}
		if !bytes.Equal(got, data[c.start:c.start+c.n]) {
			t.Fatalf("range %d+%d: wrong bytes", c.start, c.n)
		}
	}
	if end, err := f.Seek(0, io.SeekEnd); err != nil || end != int64(len(data)) {
		t.Fatalf("Seek(0, end) = %d, %v", end, err)
	}
	if n, err := f.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("Read at the end = %d, %v; want io.EOF", n, err)
	}
}

// writeSync writes b to p and syncs it.
func writeSync(t *testing.T, p blobs.Partial, b []byte) {
	t.Helper()
	if _, err := p.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := p.Sync(); err != nil {
		t.Fatal(err)
	}
}

func openPartial(t *testing.T, e blobs.Engine, id, hash string, offset int64) blobs.Partial {
	t.Helper()
	p, err := e.OpenPartial(id, hash, offset)
	if err != nil {
		t.Fatalf("OpenPartial(%d): %v", offset, err)
	}
	return p
}

// testPartial writes a transfer the way the tus handler does (write, sync,
// record the offset) across instances and crashes: an instance that stops
// after a sync it never recorded, a resume behind what was written, staged
// bytes that grow past 5 MiB into a part, and a resume on another instance.
func testPartial(t *testing.T, open Open) {
	first, again := open(t)
	data := Bytes(17*MiB+5, 9)
	hash := blobs.AddressOf(data)
	const id = "transfer-1"

	p := openPartial(t, first, id, hash, 0)
	writeSync(t, p, data[:3*MiB])      // recorded
	writeSync(t, p, data[3*MiB:6*MiB]) // recorded
	writeSync(t, p, data[6*MiB:9*MiB]) // synced, never recorded
	p.Close()

	second := again()
	if size, err := second.PartialSize(id, hash); err != nil || size < 9*MiB {
		t.Fatalf("PartialSize = %d, %v; want at least %d", size, err, 9*MiB)
	}
	// Resume behind what was written, on another instance.
	p = openPartial(t, second, id, hash, 6*MiB)
	writeSync(t, p, data[6*MiB:11*MiB])                       // recorded
	writeSync(t, p, data[11*MiB:12*MiB])                      // recorded
	if _, err := p.Write(data[12*MiB : 14*MiB]); err != nil { // never synced
		t.Fatal(err)
	}
	p.Close()

	p = openPartial(t, again(), id, hash, 12*MiB)
	writeSync(t, p, data[12*MiB:])
	info, err := p.Complete(hash)
	p.Close()
	if err != nil || info.Hash != hash || info.Size != int64(len(data)) {
		t.Fatalf("Complete = %+v, %v", info, err)
	}
	f, _, err := first.Open(hash)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readAll(t, f), data) {
		t.Fatal("the completed blob differs from the bytes written")
	}
	if err := first.RemovePartial(id); err != nil {
		t.Fatal(err)
	}
	// With its own storage gone, the partial counts as its stored blob.
	if size, err := first.PartialSize(id, hash); err != nil || size != int64(len(data)) {
		t.Errorf("after RemovePartial, PartialSize = %d, %v; want the blob's %d", size, err, len(data))
	}
	if err := first.RemovePartial(id); err != nil {
		t.Errorf("second RemovePartial = %v, want nil", err)
	}
}

func testPartialShort(t *testing.T, e blobs.Engine) {
	data := Bytes(1000, 10)
	hash := blobs.AddressOf(data)
	p := openPartial(t, e, "short", hash, 0)
	writeSync(t, p, data[:100])
	p.Close()
	if _, err := e.OpenPartial("short", hash, 101); !errors.Is(err, blobs.ErrPartialShort) {
		t.Errorf("OpenPartial past the bytes held = %v, want ErrPartialShort", err)
	}
	if _, err := e.OpenPartial("never-opened", hash, 5); !errors.Is(err, blobs.ErrPartialShort) {
		t.Errorf("OpenPartial of nothing at 5 = %v, want ErrPartialShort", err)
	}
	for _, id := range []string{"", ".", "..", "a/b"} {
		if _, err := e.OpenPartial(id, hash, 0); err == nil {
			t.Errorf("OpenPartial(%q) succeeded", id)
		}
	}
}

func testPartialExisting(t *testing.T, e blobs.Engine) {
	data := Bytes(6*MiB, 11)
	info := mustPut(t, e, data)
	p := openPartial(t, e, "again", info.Hash, 0)
	writeSync(t, p, data)
	got, err := p.Complete(info.Hash)
	p.Close()
	if err != nil || got.Size != info.Size {
		t.Fatalf("Complete of a stored blob = %+v, %v", got, err)
	}
	if err := e.RemovePartial("again"); err != nil {
		t.Fatal(err)
	}
	if err := e.Verify(info.Hash); err != nil {
		t.Fatal(err)
	}
}

// testPartialCompletedAgain: a caller that completed a partial and crashed
// before recording it resumes from its last recorded offset, on another
// instance, and completes again: the blob is found in place.
func testPartialCompletedAgain(t *testing.T, open Open) {
	first, again := open(t)
	data := Bytes(7*MiB, 12)
	hash := blobs.AddressOf(data)
	p := openPartial(t, first, "twice", hash, 0)
	writeSync(t, p, data[:4*MiB]) // recorded
	writeSync(t, p, data[4*MiB:])
	if _, err := p.Complete(hash); err != nil {
		t.Fatal(err)
	}
	p.Close()
	second := again()
	if size, err := second.PartialSize("twice", hash); err != nil || size < 4*MiB {
		t.Fatalf("PartialSize after Complete = %d, %v; want at least the recorded %d", size, err, 4*MiB)
	}
	p = openPartial(t, second, "twice", hash, 4*MiB)
	writeSync(t, p, data[4*MiB:])
	info, err := p.Complete(hash)
	p.Close()
	if err != nil || info.Size != int64(len(data)) {
		t.Fatalf("second Complete = %+v, %v", info, err)
	}
	if err := second.Verify(hash); err != nil {
		t.Fatal(err)
	}
}

func testRemove(t *testing.T, e blobs.Engine) {
	info := mustPut(t, e, []byte("to remove"))
	if err := e.Remove(info.Hash); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Stat(info.Hash); !errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("after Remove, Stat = %v", err)
	}
	if err := e.Remove(info.Hash); !errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("second Remove = %v, want ErrNotFound", err)
	}
}

func testStalePartials(t *testing.T, e blobs.Engine) {
	p := openPartial(t, e, "stale", blobs.AddressOf([]byte("x")), 0)
	writeSync(t, p, []byte("abc"))
	p.Close()
	now := time.Now()
	stale, err := e.StalePartials(now.Add(time.Hour))
	if err != nil || len(stale) != 1 || stale[0].ID != "stale" {
		t.Fatalf("StalePartials(in an hour) = %+v, %v", stale, err)
	}
	if stale, err := e.StalePartials(now.Add(-time.Hour)); err != nil || len(stale) != 0 {
		t.Fatalf("StalePartials(an hour ago) = %+v, %v", stale, err)
	}
}

func assertWalk(t *testing.T, e blobs.Engine, want []blobs.Info) {
	t.Helper()
	var got []blobs.Info
	if err := e.Walk(func(i blobs.Info) error {
		got = append(got, blobs.Info{Hash: i.Hash, Size: i.Size})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(want, func(a, b blobs.Info) int { return cmpString(a.Hash, b.Hash) })
	if !slices.Equal(got, want) {
		t.Errorf("Walk = %v, want %v", got, want)
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func testWalk(t *testing.T, e blobs.Engine) {
	var want []blobs.Info
	for i := range 5 {
		info := mustPut(t, e, Bytes(10+i, uint64(i)))
		want = append(want, blobs.Info{Hash: info.Hash, Size: info.Size})
	}
	// A partial is not a blob.
	p := openPartial(t, e, "walk", blobs.AddressOf([]byte("y")), 0)
	writeSync(t, p, []byte("partial"))
	p.Close()
	assertWalk(t, e, want)
	stop := errors.New("stop")
	n := 0
	if err := e.Walk(func(blobs.Info) error { n++; return stop }); err != stop || n != 1 {
		t.Errorf("Walk stopped by its callback = %v after %d calls", err, n)
	}
}

func testCollect(t *testing.T, e blobs.Engine) {
	info := mustPut(t, e, []byte("old"))
	// A cutoff before the blob was written keeps it.
	if removed, err := e.Collect(info.Hash, time.Now().Add(-time.Hour)); err != nil || removed {
		t.Fatalf("Collect(young) = %v, %v", removed, err)
	}
	if removed, err := e.Collect(info.Hash, time.Now().Add(time.Hour)); err != nil || !removed {
		t.Fatalf("Collect(old) = %v, %v", removed, err)
	}
	if _, err := e.Stat(info.Hash); !errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("after Collect, Stat = %v", err)
	}
	if _, err := e.Collect(info.Hash, time.Now()); !errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("Collect(missing) = %v, want ErrNotFound", err)
	}
}

// testCollectRacesPut: Collect with a cutoff after a blob was written races
// a Put of the same bytes; whatever the order, a Put that reports success
// leaves the blob in place.
func testCollectRacesPut(t *testing.T, e blobs.Engine) {
	for i := range 15 {
		// Every fifth blob spans two S3 parts: its Put is a multipart upload
		// that keeps its upload open until its claim is settled.
		size := 100 + i
		if i%5 == 4 {
			size = 6*MiB + i
		}
		data := Bytes(size, uint64(1000+i))
		info := mustPut(t, e, data)
		// Taken after the write: the blob is older than the cutoff, a claim
		// made from now on is not.
		cutoff := time.Now()
		var wg sync.WaitGroup
		var putErr, collectErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, _, putErr = e.Put(bytes.NewReader(data), info.Hash, 0)
		}()
		go func() {
			defer wg.Done()
			_, collectErr = e.Collect(info.Hash, cutoff)
		}()
		wg.Wait()
		if collectErr != nil && !errors.Is(collectErr, blobs.ErrNotFound) {
			t.Fatal(collectErr)
		}
		if putErr != nil {
			t.Fatal(putErr)
		}
		if _, err := e.Stat(info.Hash); err != nil {
			t.Fatalf("round %d: a Put reported success, then Stat = %v", i, err)
		}
		if err := e.Verify(info.Hash); err != nil {
			t.Fatal(err)
		}
	}
}

func testTemp(t *testing.T, e blobs.Engine) {
	mustPut(t, e, []byte("temp"))
	if err := e.CheckWritable(); err != nil {
		t.Fatalf("CheckWritable = %v", err)
	}
	tc, ok := e.(blobs.TempCleaner)
	if !ok {
		return
	}
	past := time.Now().Add(-time.Hour)
	if n, err := tc.StaleTemp(past); err != nil || n != 0 {
		t.Errorf("StaleTemp(an hour ago) = %d, %v", n, err)
	}
	if n, err := tc.CleanTemp(past); err != nil || n != 0 {
		t.Errorf("CleanTemp(an hour ago) = %d, %v", n, err)
	}
	if _, err := tc.CleanTemp(time.Now().Add(time.Hour)); err != nil {
		t.Errorf("CleanTemp(in an hour) = %v", err)
	}
	if n, err := tc.StaleTemp(time.Now().Add(time.Hour)); err != nil || n != 0 {
		t.Errorf("after CleanTemp, StaleTemp = %d, %v", n, err)
	}
}
