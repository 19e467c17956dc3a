package bolt_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	sbolt "sealbox/kv/bolt"
)

// pageCheckStore writes a store with what the page check walks: a bucket
// deep enough for branch pages, values that overflow their page, a nested
// bucket with a page of its own and an inline one, and free pages.
func pageCheckStore(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pages.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		values, err := tx.CreateBucket([]byte("values"))
		if err != nil {
			return err
		}
		for i := range 5000 {
			size := 100
			if i%500 == 0 {
				size = 10000
			}
			if err := values.Put(fmt.Appendf(nil, "key-%06d", i), make([]byte, size)); err != nil {
				return err
			}
		}
		outer, err := tx.CreateBucket([]byte("outer"))
		if err != nil {
			return err
		}
		big, err := outer.CreateBucket([]byte("big"))
		if err != nil {
			return err
		}
		for i := range 500 {
			if err := big.Put(fmt.Appendf(nil, "%04d", i), make([]byte, 50)); err != nil {
				return err
			}
		}
		small, err := outer.CreateBucket([]byte("small"))
		if err != nil {
			return err
		}
		return small.Put([]byte("one"), []byte("value"))
	})
	if err != nil {
		t.Fatal(err)
	}
	// Deleting half the values frees pages, which the freelist lists.
	err = db.Update(func(tx *bolt.Tx) error {
		for i := 0; i < 5000; i += 2 {
			if err := tx.Bucket([]byte("values")).Delete(fmt.Appendf(nil, "key-%06d", i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// bboltProblems is what bbolt's own Tx.Check finds in the file at path.
func bboltProblems(t *testing.T, path string) []error {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var problems []error
	db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			problems = append(problems, err)
		}
		return nil
	})
	return problems
}

func ourProblems(t *testing.T, path string) []error {
	t.Helper()
	e, err := sbolt.Open(path, sbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	problems, err := e.CheckPages()
	if err != nil {
		t.Fatal(err)
	}
	return problems
}

// pageOf returns the id, and bytes, of the first page of the given type
// (bbolt's names: "branch", "leaf", "freelist") that has at least
// elements elements.
func pageOf(t *testing.T, path, kind string, elements int) (uint64, []byte) {
	t.Helper()
	// Read-write: Tx.Page needs the freelist, which a read-only open leaves
	// unread.
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	size := db.Info().PageSize
	var found uint64
	db.View(func(tx *bolt.Tx) error {
		for id := 2; id < int(tx.Size())/size; id++ {
			info, err := tx.Page(id)
			if err == nil && info != nil && info.Type == kind && info.Count >= elements {
				found = uint64(id)
				return nil
			}
		}
		return nil
	})
	if found == 0 {
		t.Fatalf("no %s page with %d elements", kind, elements)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	page := make([]byte, size)
	if _, err := f.ReadAt(page, int64(found)*int64(size)); err != nil {
		t.Fatal(err)
	}
	return found, page
}

// rewritePage writes page back over page id of the file at path.
func rewritePage(t *testing.T, path string, id uint64, page []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(page, int64(id)*int64(len(page))); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "copy.db")
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	return to
}

// Element offsets of a page (go.etcd.io/bbolt/internal/common/page.go): a
// 16-byte header, then 16-byte elements; a branch element is (pos, ksize
// uint32, pgid uint64), a leaf element (flags, pos, ksize, vsize uint32),
// pos counted from the element.
const (
	header  = 16
	element = 16
)

// TestCheckPages: the engine's page check finds nothing in a sound file and
// something in each damaged one, as bbolt's own Tx.Check does; the damage
// is made on disk, page by page.
func TestCheckPages(t *testing.T) {
	sound := pageCheckStore(t)
	if got, want := ourProblems(t, sound), bboltProblems(t, sound); len(got) != 0 || len(want) != 0 {
		t.Fatalf("a sound file: the page check found %v, bbolt's %v", got, want)
	}
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"leaf keys out of order", func(t *testing.T, path string) {
			id, page := pageOf(t, path, "leaf", 2)
			// The keys are "key-%06d": make the first greater than the second.
			pos := binary.LittleEndian.Uint32(page[header+4:])
			page[header+pos+9] = '9'
			page[header+pos+8] = '9'
			rewritePage(t, path, id, page)
		}},
		{"branch child outside the file", func(t *testing.T, path string) {
			id, page := pageOf(t, path, "branch", 2)
			binary.LittleEndian.PutUint64(page[header+8:], 1<<40)
			rewritePage(t, path, id, page)
		}},
		{"branch children the same page", func(t *testing.T, path string) {
			id, page := pageOf(t, path, "branch", 2)
			copy(page[header+element+8:header+element+16], page[header+8:header+16])
			rewritePage(t, path, id, page)
		}},
		{"freelist emptied", func(t *testing.T, path string) {
			id, page := pageOf(t, path, "freelist", 1)
			binary.LittleEndian.PutUint16(page[10:], 0)
			rewritePage(t, path, id, page)
		}},
		{"freelist lists a reachable page", func(t *testing.T, path string) {
			leaf, _ := pageOf(t, path, "leaf", 2)
			id, page := pageOf(t, path, "freelist", 1)
			binary.LittleEndian.PutUint64(page[header:], leaf)
			rewritePage(t, path, id, page)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := copyFile(t, sound)
			tc.damage(t, path)
			got, want := ourProblems(t, path), bboltProblems(t, path)
			if len(want) == 0 {
				t.Fatal("bbolt's Tx.Check finds nothing wrong: the damage is not damage")
			}
			if len(got) == 0 {
				t.Fatalf("the page check found nothing; bbolt's found %v", want)
			}
			if len(got) > 1001 {
				t.Fatalf("the page check listed %d problems, more than its bound", len(got))
			}
			t.Logf("found %d problems, the first %v; bbolt's check %d", len(got), got[0], len(want))
		})
	}
}
