package bolt

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// fuzzPageSize is the page size of the fuzzed files: small, so that a
// fuzzer's input spans several pages.
const fuzzPageSize = 256

// leafBytes is a leaf page of fuzzPageSize bytes holding keys, each with
// an empty value, in the layout pagecheck.go reads.
func leafBytes(id uint64, keys ...string) []byte {
	p := make([]byte, fuzzPageSize)
	binary.NativeEndian.PutUint64(p, id)
	binary.NativeEndian.PutUint16(p[8:], leafPage)
	binary.NativeEndian.PutUint16(p[10:], uint16(len(keys)))
	data := pageHeaderSize + len(keys)*elementSize
	for i, k := range keys {
		at := pageHeaderSize + i*elementSize
		binary.NativeEndian.PutUint32(p[at+4:], uint32(data-at))
		binary.NativeEndian.PutUint32(p[at+8:], uint32(len(k)))
		data += copy(p[data:], k)
	}
	return p
}

// FuzzPageCheck: whatever bytes a damaged file holds, the page check
// reads them without panicking, without reading past the file, and lists
// a bounded number of problems. The input is a file of fuzzPageSize pages
// whose page 2 is the freelist and page 3 the root.
func FuzzPageCheck(f *testing.F) {
	freelist := make([]byte, fuzzPageSize)
	binary.NativeEndian.PutUint64(freelist, 2)
	binary.NativeEndian.PutUint16(freelist[8:], freelistPage)
	meta := make([]byte, 2*fuzzPageSize)
	f.Add(append(append(bytes.Clone(meta), freelist...), leafBytes(3, "a", "b")...))
	f.Add(append(append(bytes.Clone(meta), freelist...), leafBytes(3, "b", "a")...))
	f.Fuzz(func(t *testing.T, file []byte) {
		if len(file) > 64*fuzzPageSize {
			return
		}
		pages := max(4, (len(file)+fuzzPageSize-1)/fuzzPageSize)
		padded := make([]byte, pages*fuzzPageSize)
		copy(padded, file)
		c := newPageCheck(bytes.NewReader(padded), fuzzPageSize, uint64(pages))
		problems, err := c.run(3, 2)
		if err != nil {
			t.Fatalf("reading a file of %d pages within its bounds failed: %v", pages, err)
		}
		if len(problems) > maxPageProblems+1 {
			t.Fatalf("%d problems listed", len(problems))
		}
	})
}

// TestPageCheckSeeds: the fuzz target's two seeds, one sound and one with
// its keys out of order, are told apart.
func TestPageCheckSeeds(t *testing.T) {
	freelist := make([]byte, fuzzPageSize)
	binary.NativeEndian.PutUint16(freelist[8:], freelistPage)
	meta := make([]byte, 2*fuzzPageSize)
	for _, tc := range []struct {
		keys     []string
		problems int
	}{{[]string{"a", "b"}, 0}, {[]string{"b", "a"}, 1}} {
		file := append(append(bytes.Clone(meta), freelist...), leafBytes(3, tc.keys...)...)
		problems, err := newPageCheck(bytes.NewReader(file), fuzzPageSize, 4).run(3, 2)
		if err != nil || len(problems) != tc.problems {
			t.Fatalf("keys %q: %v, %v; want %d problems", tc.keys, problems, err, tc.problems)
		}
	}
}
