package blobhttp

import (
	"math"
	"strconv"
	"strings"
)

// ByteRange is one satisfiable range of a representation's bytes. Both ends are
// inclusive, as in "Content-Range: bytes Start-End/size", and 0 <= Start <= End < size.
type ByteRange struct {
	Start, End int64
}

// ParseRange parses a Range header value (RFC 9110 section 14.1.2) against a
// representation of size bytes.
//
// It returns the satisfiable ranges in the order the header lists them, clamped to
// the representation: an int-range whose last-pos lies past the end stops at
// size-1, and a suffix-range longer than the representation covers all of it.
// Range specs that cannot be satisfied (first-pos >= size, a suffix-length of 0, or
// anything asked of an empty representation) are dropped, as RFC 9110 section 14.2
// allows. Overlapping or unordered ranges are returned as listed.
//
// ok is false, and ranges nil, when the header is malformed or nothing in it is
// satisfiable; the caller then ignores the header. Malformed means: a range unit
// other than "bytes" (compared case-insensitively); no range spec; a range spec
// that is not "first-last", "first-" or "-suffix" with decimal digits only; or a
// last-pos below its first-pos. Whitespace (SP, HTAB) is allowed only around list
// elements, and empty list elements are skipped (RFC 9110 section 5.6.1).
// Positions too large for an int64 are well-formed and saturate, so
// "bytes=0-99999999999999999999" is the whole representation.
func ParseRange(header string, size int64) (ranges []ByteRange, ok bool) {
	unit, set, found := strings.Cut(header, "=")
	if !found || !strings.EqualFold(unit, "bytes") {
		return nil, false
	}
	for spec := range strings.SplitSeq(set, ",") {
		spec = strings.Trim(spec, " \t")
		if spec == "" {
			continue
		}
		first, last, found := strings.Cut(spec, "-")
		if !found {
			return nil, false
		}
		if first == "" {
			suffix, valid := parseDigits(last)
			if !valid {
				return nil, false
			}
			if suffix > 0 && size > 0 {
				ranges = append(ranges, ByteRange{Start: size - min(suffix, size), End: size - 1})
			}
			continue
		}
		start, valid := parseDigits(first)
		if !valid {
			return nil, false
		}
		end := int64(math.MaxInt64)
		if last != "" {
			if end, valid = parseDigits(last); !valid || end < start {
				return nil, false
			}
		}
		if start < size {
			ranges = append(ranges, ByteRange{Start: start, End: min(end, size-1)})
		}
	}
	if len(ranges) == 0 {
		return nil, false
	}
	return ranges, true
}

// parseDigits parses 1*DIGIT. It saturates at math.MaxInt64 rather than failing,
// because an over-long position is still well-formed: it is either clamped to the
// end of the representation or unsatisfiable.
func parseDigits(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if n > (math.MaxInt64-d)/10 {
			n = math.MaxInt64
			continue
		}
		n = n*10 + d
	}
	return n, true
}

// formatRange renders ranges as a canonical Range header value, "bytes=0-9,20-29".
func formatRange(ranges []ByteRange) string {
	b := []byte("bytes=")
	for i, r := range ranges {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, r.Start, 10)
		b = append(b, '-')
		b = strconv.AppendInt(b, r.End, 10)
	}
	return string(b)
}
