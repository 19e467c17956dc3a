package content_test

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"sealbox/blobs"
	"sealbox/kv"
	"sealbox/kv/kvtest"
	"sealbox/server/content"
)

// mustOpen is a placement over a new bbolt store and blob directory,
// keeping blobs of up to inlineMax bytes inline.
func mustOpen(t *testing.T, inlineMax int64) (*content.Content, blobs.Engine) {
	t.Helper()
	dir := t.TempDir()
	store, err := kvtest.Open(filepath.Join(dir, "sealbox.db"), kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	engine, err := blobs.Open(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	return content.New(store, engine, inlineMax), engine
}

func TestInlineKeepsOneToInlineMaxBytes(t *testing.T) {
	c, _ := mustOpen(t, 4)
	for _, tc := range []struct {
		data   string
		inline bool
	}{{"", false}, {"a", true}, {"abcd", true}, {"abcde", false}} {
		if got := c.Inline([]byte(tc.data)) != nil; got != tc.inline {
			t.Errorf("Inline(%q): got inline %v, want %v", tc.data, got, tc.inline)
		}
	}
	if got := content.New(nil, nil, 0).Inline([]byte("a")); got != nil {
		t.Errorf("with no inline threshold: got %q inline, want none", got)
	}
}

func TestPutPlacesBySize(t *testing.T) {
	c, engine := mustOpen(t, 4)
	small, large := []byte("abc"), []byte("abcdefgh")

	b, err := c.Put(bytes.NewReader(small), blobs.AddressOf(small), -1, 100)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Data, small) || b.Size != 3 {
		t.Errorf("small blob: got data %q size %d, want its bytes to keep inline", b.Data, b.Size)
	}
	if _, err := engine.Stat(b.Hash); !errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("small blob: got a file (%v), want none", err)
	}

	b, err = c.Put(bytes.NewReader(large), blobs.AddressOf(large), int64(len(large)), 100)
	if err != nil {
		t.Fatal(err)
	}
	if b.Data != nil || b.Size != int64(len(large)) {
		t.Errorf("large blob: got data %q size %d, want a file of %d bytes", b.Data, b.Size, len(large))
	}
	f, err := c.Open(b)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, _ := io.ReadAll(f); !bytes.Equal(got, large) {
		t.Errorf("large blob read back: got %q, want %q", got, large)
	}

	if _, err := c.Put(strings.NewReader("abd"), blobs.AddressOf(small), -1, 100); !errors.Is(err, blobs.ErrHashMismatch) {
		t.Errorf("small blob of another hash: got %v, want ErrHashMismatch", err)
	}
}

// TestCompleteMakesThePartialAFileBlob: a completed partial is the blob as
// a file of the engine, even one small enough to keep inline, and a partial
// reopened past offset 0 afterwards writes nothing into it.
func TestCompleteMakesThePartialAFileBlob(t *testing.T) {
	c, engine := mustOpen(t, 4)
	data := []byte("abc")
	hash := blobs.AddressOf(data)
	p, err := engine.OpenPartial("t-1", hash, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := p.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := c.Complete(p, hash); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if info, err := engine.Stat(hash); err != nil || info.Size != 3 {
		t.Fatalf("the completed blob's file: got %+v, %v; want its 3 bytes", info, err)
	}

	again, err := engine.OpenPartial("t-1", hash, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := again.Write([]byte("XY")); err != nil {
		t.Fatal(err)
	}
	if err := c.Complete(again, hash); err != nil {
		t.Fatal(err)
	}
	again.Close()
	f, err := c.Open(kv.Blob{Hash: hash, Size: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, err := io.ReadAll(f); err != nil || !bytes.Equal(got, data) {
		t.Errorf("the blob after a write to its reopened partial: got %q, %v; want %q", got, err, data)
	}
}
