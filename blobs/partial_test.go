package blobs_test

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sealbox/blobs"
)

func mustWrite(tb testing.TB, p blobs.Partial, b []byte) {
	tb.Helper()
	if _, err := p.Write(b); err != nil {
		tb.Fatal(err)
	}
	if err := p.Sync(); err != nil {
		tb.Fatal(err)
	}
}

// TestPartialLifecycle: a partial is written in steps across opens, cut back
// to the acknowledged offset when more was written, refused when it holds
// less, completed into a blob and removed.
func TestPartialLifecycle(t *testing.T) {
	s := MustOpenStore(t)
	data := bytes.Repeat([]byte("0123456789"), 300_000) // 3 MB: the writeback hint runs
	hash := blobs.AddressOf(data)
	if n, err := s.PartialSize("t1", hash); err != nil || n != 0 {
		t.Fatalf("size before any byte: %d %v", n, err)
	}
	p, err := s.OpenPartial("t1", hash, 0)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, p, data[:2_000_000])
	p.Close()

	// Bytes past the acknowledged offset are cut off on the next open.
	p, err = s.OpenPartial("t1", hash, 1_500_000)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := s.PartialSize("t1", hash); n != 1_500_000 {
		t.Fatalf("size after reopening at 1.5 MB: %d", n)
	}
	mustWrite(t, p, data[1_500_000:])
	info, err := p.Complete(hash)
	p.Close()
	if err != nil || info.Size != int64(len(data)) {
		t.Fatalf("complete: %+v %v", info, err)
	}
	// The partial became the blob by a move: it has no name of its own left.
	if _, err := os.Stat(filepath.Join(s.Path(), "tus", "t1")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the partial's name outlived Complete: %v", err)
	}
	f, _, err := s.Open(hash)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(f)
	f.Close()
	if !bytes.Equal(got, data) {
		t.Fatal("the completed blob differs from the bytes written")
	}
	if err := s.RemovePartial("t1"); err != nil {
		t.Fatal(err)
	}
	if err := s.RemovePartial("t1"); err != nil {
		t.Fatalf("removing a partial twice: %v", err)
	}
	if _, err := s.Stat(hash); err != nil {
		t.Fatal(err)
	}

	// A partial holding less than acknowledged: the disk lost bytes.
	p, _ = s.OpenPartial("t2", hash, 0)
	mustWrite(t, p, data[:10])
	p.Close()
	if _, err := s.OpenPartial("t2", hash, 11); !errors.Is(err, blobs.ErrPartialShort) {
		t.Fatalf("opening past the bytes held: %v", err)
	}
}

// TestCompletedPartialNeverWritten: once a partial is a blob, reopening it
// at an offset its caller recorded before the completion (a refused or
// crashed completion that the client resumes) writes nothing into the blob,
// whether the partial was moved or, after a crash of the link-then-remove
// fallback, still shares the blob's file; its Complete claims the blob.
func TestCompletedPartialNeverWritten(t *testing.T) {
	s := MustOpenStore(t)
	data := bytes.Repeat([]byte("sealed bytes "), 100_000)
	hash := blobs.AddressOf(data)
	p, err := s.OpenPartial("done", hash, 0)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, p, data)
	if _, err := p.Complete(hash); err != nil {
		t.Fatal(err)
	}
	p.Close()
	blobPath := filepath.Join(s.Path(), hash[:2], hash[2:4], hash)
	for _, alias := range []bool{false, true} {
		if alias {
			// What a crash between link and remove leaves.
			if err := os.Link(blobPath, filepath.Join(s.Path(), "tus", "done")); err != nil {
				t.Fatal(err)
			}
		}
		p, err := s.OpenPartial("done", hash, 1000)
		if err != nil {
			t.Fatalf("alias %v: reopen the completed partial: %v", alias, err)
		}
		mustWrite(t, p, []byte("JUNK"))
		info, err := p.Complete(hash)
		p.Close()
		if err != nil || info.Size != int64(len(data)) {
			t.Fatalf("alias %v: Complete of a completed partial = %+v, %v", alias, info, err)
		}
		if err := s.Verify(hash); err != nil {
			t.Fatalf("alias %v: the blob was written through its partial: %v", alias, err)
		}
		if n, err := s.PartialSize("done", hash); err != nil || n != int64(len(data)) {
			t.Fatalf("alias %v: PartialSize = %d, %v; want the blob's %d", alias, n, err, len(data))
		}
	}
}

// TestPartialIDs: no id reaches outside the partials.
func TestPartialIDs(t *testing.T) {
	s := MustOpenStore(t)
	for _, id := range []string{"", ".", "..", "../escape", "a/b", "/abs"} {
		if _, err := s.OpenPartial(id, blobs.AddressOf(nil), 0); err == nil {
			t.Errorf("OpenPartial(%q) succeeded", id)
		}
		if _, err := s.PartialSize(id, blobs.AddressOf(nil)); err == nil {
			t.Errorf("PartialSize(%q) succeeded", id)
		}
		if err := s.RemovePartial(id); err == nil {
			t.Errorf("RemovePartial(%q) succeeded", id)
		}
	}
}

// TestStalePartials lists partials last written before the cutoff only,
// and blobs' Walk never sees them.
func TestStalePartials(t *testing.T) {
	s := MustOpenStore(t)
	for _, id := range []string{"old", "new"} {
		p, err := s.OpenPartial(id, blobs.AddressOf([]byte(id)), 0)
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, p, []byte(id))
		p.Close()
	}
	past := time.Now().Add(-48 * time.Hour)
	if err := os.Chtimes(filepath.Join(s.Path(), "tus", "old"), past, past); err != nil {
		t.Fatal(err)
	}
	stale, err := s.StalePartials(time.Now().Add(-time.Hour))
	if err != nil || len(stale) != 1 || stale[0].ID != "old" || stale[0].Size != 3 {
		t.Fatalf("stale partials: %+v %v", stale, err)
	}
	walked := 0
	s.Walk(func(blobs.Info) error { walked++; return nil })
	if walked != 0 {
		t.Fatalf("Walk visited %d partials as blobs", walked)
	}
}

// TestLinkFrom: a blob another store holds is linked, not copied; one it
// does not hold is reported, not an error.
func TestLinkFrom(t *testing.T) {
	src, dst := MustOpenStore(t), MustOpenStore(t)
	info, _, err := src.PutBytes([]byte("a generation's blob"))
	if err != nil {
		t.Fatal(err)
	}
	linked, err := dst.LinkFrom(src, info.Hash)
	if err != nil || !linked {
		t.Fatalf("LinkFrom: %v %v", linked, err)
	}
	a, _ := os.Stat(filepath.Join(src.Path(), info.Hash[:2], info.Hash[2:4], info.Hash))
	b, _ := os.Stat(filepath.Join(dst.Path(), info.Hash[:2], info.Hash[2:4], info.Hash))
	if a == nil || b == nil || !os.SameFile(a, b) {
		t.Fatal("the linked blob is not the same file")
	}
	if linked, err := dst.LinkFrom(src, blobs.AddressOf([]byte("absent"))); err != nil || linked {
		t.Fatalf("LinkFrom of a blob src lacks: %v %v", linked, err)
	}
	if _, err := dst.LinkFrom(src, "nope"); !errors.Is(err, blobs.ErrInvalidHash) {
		t.Fatalf("LinkFrom of an invalid hash: %v", err)
	}
}
