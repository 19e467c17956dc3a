package blobhttp

import (
	"math"
	"slices"
	"testing"
)

func TestParseRange(t *testing.T) {
	for _, tt := range []struct {
		header string
		size   int64
		want   []ByteRange // nil means ok is false
	}{
		{"bytes=0-9", 100, []ByteRange{{0, 9}}},
		{"bytes=0-0", 1, []ByteRange{{0, 0}}},
		{"bytes=90-", 100, []ByteRange{{90, 99}}},
		{"bytes=-10", 100, []ByteRange{{90, 99}}},
		{"bytes=-1000", 100, []ByteRange{{0, 99}}},
		{"bytes=95-1000", 100, []ByteRange{{95, 99}}},
		{"bytes=0-99999999999999999999", 100, []ByteRange{{0, 99}}},
		{"bytes=-99999999999999999999", 100, []ByteRange{{0, 99}}},
		{"bytes=0-9,20-29,-5", 100, []ByteRange{{0, 9}, {20, 29}, {95, 99}}},
		{"bytes= 0-9 ,\t20-29", 100, []ByteRange{{0, 9}, {20, 29}}},
		{"bytes=0-9,,", 100, []ByteRange{{0, 9}}},
		{"bytes=,0-9", 100, []ByteRange{{0, 9}}},
		{"bytes=50-59,0-9,55-60", 100, []ByteRange{{50, 59}, {0, 9}, {55, 60}}},
		{"Bytes=0-9", 100, []ByteRange{{0, 9}}},
		{"BYTES=0-9", 100, []ByteRange{{0, 9}}},
		{"bytes=1000-2000,0-1", 100, []ByteRange{{0, 1}}},
		{"bytes=-0,0-1", 100, []ByteRange{{0, 1}}},

		// Malformed.
		{"", 100, nil},
		{"bytes", 100, nil},
		{"bytes=", 100, nil},
		{"bytes=,", 100, nil},
		{"bytes=abc", 100, nil},
		{"items=0-1", 100, nil},
		{"bytes =0-1", 100, nil},
		{"bytes=5-2", 100, nil},
		{"bytes=-", 100, nil},
		{"bytes=--5", 100, nil},
		{"bytes=0", 100, nil},
		{"bytes=0-1-2", 100, nil},
		{"bytes=+1-2", 100, nil},
		{"bytes=1-+2", 100, nil},
		{"bytes=0x1-2", 100, nil},
		{"bytes=0 -1", 100, nil},
		{"bytes=0-1;q=1", 100, nil},
		{"bytes=0-1,x", 100, nil},
		{"bytes=1000-2000,5-2", 100, nil},

		// Well-formed but unsatisfiable.
		{"bytes=100-", 100, nil},
		{"bytes=1000-2000", 100, nil},
		{"bytes=99999999999999999999-", 100, nil},
		{"bytes=-0", 100, nil},
		{"bytes=0-", 0, nil},
		{"bytes=-5", 0, nil},
		{"bytes=0-0", -1, nil},
	} {
		got, ok := ParseRange(tt.header, tt.size)
		if ok != (tt.want != nil) || !slices.Equal(got, tt.want) {
			t.Errorf("ParseRange(%q, %d): got %v, %t, want %v, %t", tt.header, tt.size, got, ok, tt.want, tt.want != nil)
		}
	}
}

func FuzzParseRange(f *testing.F) {
	for _, s := range []string{
		"bytes=0-9", "bytes=-10", "bytes=90-", "bytes=0-9,20-29,-5", "bytes= 0-9 ,\t20-29",
		"bytes=,0-9,,", "Bytes=0-0", "bytes=0-99999999999999999999", "bytes=99999999999999999999-",
		"bytes=abc", "items=0-1", "bytes=5-2", "bytes=", "bytes=-", "bytes=--5", "bytes=+1-2",
		"bytes=-0", "bytes=1000-",
	} {
		f.Add(s, int64(100))
	}
	f.Add("bytes=0-", int64(0))
	f.Add("bytes=-1", int64(-1))
	f.Add("bytes=0-", int64(math.MaxInt64))
	f.Add("bytes=-9223372036854775807", int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, header string, size int64) {
		ranges, ok := ParseRange(header, size)
		if ok != (len(ranges) > 0) {
			t.Fatalf("ParseRange(%q, %d): ok %t with %d ranges", header, size, ok, len(ranges))
		}
		for _, ra := range ranges {
			if ra.Start < 0 || ra.Start > ra.End || ra.End >= size {
				t.Fatalf("ParseRange(%q, %d): range %v outside [0,%d) or reversed", header, size, ra, size)
			}
		}
		if !ok {
			return
		}
		// The canonical form Serve hands to ServeContent means the same ranges.
		again, ok := ParseRange(formatRange(ranges), size)
		if !ok || !slices.Equal(again, ranges) {
			t.Fatalf("ParseRange(formatRange(%v), %d): got %v, %t", ranges, size, again, ok)
		}
	})
}
