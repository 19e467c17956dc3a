package server

import (
	"encoding/binary"

	"github.com/fxamacker/cbor/v2"
)

// cborLimits are the limits of a CBOR well-formedness check, with the
// meaning of the decoder options of the same names: nesting of arrays,
// maps and tags, elements of one array, pairs of one map.
type cborLimits struct {
	MaxNestedLevels, MaxArrayElements, MaxMapPairs int
}

// decMode is the fxamacker decoding mode with the same limits, for
// decoding the few values the server reads once the check has passed.
func (lim cborLimits) decMode() cbor.DecMode {
	return mustDecMode(cbor.DecOptions{
		MaxNestedLevels:  lim.MaxNestedLevels,
		MaxArrayElements: lim.MaxArrayElements,
		MaxMapPairs:      lim.MaxMapPairs,
	})
}

// wellFormed reports whether b is exactly one well-formed CBOR data item
// within lim: the verdict of fxamacker's DecMode.Wellformed with the same
// limits (FuzzWellFormed holds them to it), but iterative, so deep nesting
// costs a slice of frames on the heap, at most one per byte of b, instead
// of a goroutine stack frame per level.
func wellFormed(b []byte, lim cborLimits) bool {
	end, ok := cborItemEnd(b, 0, 0, lim)
	return ok && end == len(b)
}

// cborFrame is an array or map the check has opened and not yet closed:
// 16 bytes, so the deepest 256 KiB body holds 4 MiB of them at most.
type cborFrame struct {
	// n is how many items a definite container still holds (a map holds
	// two per pair), and how many an indefinite one has held so far.
	n uint64
	// depth is the container's nesting level, the decoder's way: arrays
	// and maps count, and so does each tag whose content is another tag.
	depth      int32
	indefinite bool
	isMap      bool
}

// cborItemEnd returns where the data item starting at b[off] ends, and
// whether it is well-formed within lim, taking depth as the nesting level
// of the container it is in (0 at the top). It reads each byte once.
func cborItemEnd(b []byte, off, depth int, lim cborLimits) (int, bool) {
	var stack []cborFrame
	level := depth  // the level of the container the next item is in
	tagged := false // the next item is the content of a tag
	tagLevels := 0  // levels added by tags of tags before the next item
	for {
		if off >= len(b) {
			return 0, false
		}
		top := len(stack) - 1
		if top >= 0 && !tagged && stack[top].indefinite && b[off] == 0xff {
			if f := &stack[top]; f.isMap && f.n%2 == 1 {
				return 0, false
			}
			off++
			stack = stack[:top]
		} else {
			major, indefinite := b[off]>>5, b[off]&0x1f == 31
			val, next, ok := cborHead(b, off)
			if !ok {
				return 0, false
			}
			off = next
			switch major {
			case 2, 3:
				if off, ok = cborStringEnd(b, off, major, indefinite, val); !ok {
					return 0, false
				}
			case 4, 5:
				d := level + tagLevels + 1
				if d > lim.MaxNestedLevels {
					return 0, false
				}
				f := cborFrame{indefinite: indefinite, isMap: major == 5, depth: int32(d)}
				if !indefinite {
					if (major == 4 && val > uint64(lim.MaxArrayElements)) || (major == 5 && val > uint64(lim.MaxMapPairs)) {
						return 0, false
					}
					f.n = val
					if major == 5 {
						f.n *= 2
					}
					// Every item takes a byte at least.
					if f.n > uint64(len(b)-off) {
						return 0, false
					}
				}
				if indefinite || f.n > 0 {
					stack = push(stack, f)
					level, tagged, tagLevels = d, false, 0
					continue
				}
			case 6:
				if tagged {
					tagLevels++
					if level+tagLevels > lim.MaxNestedLevels {
						return 0, false
					}
				}
				tagged = true
				continue
			}
		}
		// An item is complete: count it in the containers it completes.
		tagged, tagLevels = false, 0
		var ok bool
		if stack, ok = completeItem(stack, lim); !ok {
			return 0, false
		}
		if len(stack) == 0 {
			return off, true
		}
		level = int(stack[len(stack)-1].depth)
	}
}

// push appends f to stack, doubling its capacity when full: append grows a
// large slice by a quarter only, which would copy a deep stack many times.
func push(stack []cborFrame, f cborFrame) []cborFrame {
	if len(stack) == cap(stack) {
		grown := make([]cborFrame, len(stack), max(16, 2*cap(stack)))
		copy(grown, stack)
		stack = grown
	}
	return append(stack, f)
}

// completeItem counts a completed item in the innermost open container,
// closing every definite container it completes; it refuses an indefinite
// container grown past lim.
func completeItem(stack []cborFrame, lim cborLimits) ([]cborFrame, bool) {
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		if f.indefinite {
			f.n++
			tooMany := (!f.isMap && f.n > uint64(lim.MaxArrayElements)) ||
				(f.isMap && f.n%2 == 0 && f.n/2 > uint64(lim.MaxMapPairs))
			return stack, !tooMany
		}
		if f.n--; f.n > 0 {
			return stack, true
		}
		stack = stack[:len(stack)-1]
	}
	return stack, true
}

// cborHead reads the head at b[off]: its argument and where the head ends.
// It refuses a truncated head, additional information 28 to 30, an
// indefinite length on an integer, a tag or a simple value (a break where
// no indefinite item is open), and a one-byte simple value under 32.
func cborHead(b []byte, off int) (val uint64, next int, ok bool) {
	major, ai := b[off]>>5, b[off]&0x1f
	off++
	size := 0
	switch {
	case ai < 24:
		return uint64(ai), off, true
	case ai == 24:
		size = 1
	case ai == 25:
		size = 2
	case ai == 26:
		size = 4
	case ai == 27:
		size = 8
	case ai == 31:
		return 0, off, major == 2 || major == 3 || major == 4 || major == 5
	default:
		return 0, 0, false
	}
	if len(b)-off < size {
		return 0, 0, false
	}
	var arg [8]byte
	copy(arg[8-size:], b[off:off+size])
	val = binary.BigEndian.Uint64(arg[:])
	if major == 7 && size == 1 && val < 32 {
		return 0, 0, false
	}
	return val, off + size, true
}

// cborStringEnd returns where the byte or text string (major) whose head
// ends at off ends: after val bytes, or, for an indefinite string, after
// its chunks (definite strings of the same major type) and the break.
func cborStringEnd(b []byte, off int, major byte, indefinite bool, val uint64) (int, bool) {
	if !indefinite {
		if val > uint64(len(b)-off) {
			return 0, false
		}
		return off + int(val), true
	}
	for {
		if off >= len(b) {
			return 0, false
		}
		if b[off] == 0xff {
			return off + 1, true
		}
		if b[off]>>5 != major || b[off]&0x1f == 31 {
			return 0, false
		}
		n, next, ok := cborHead(b, off)
		if !ok || n > uint64(len(b)-next) {
			return 0, false
		}
		off = next + int(n)
	}
}
