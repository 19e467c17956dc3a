package server

import (
	"github.com/fxamacker/cbor/v2"
)

// topLevelMap reads a CBOR document that the server stores verbatim and of
// which it reads only a few text keys (a device directory, an upgrade
// intent). body must be exactly one well-formed data item within lim whose
// top level is a map: major type 5 in its initial byte, so a map inside a
// tag (such as self-describe, 55799) is refused, being a tag, not a map.
//
// It returns the encoded values of the text keys by their text. Keys of
// every other type are skipped, whatever they hold. The map is walked item by
// item rather than decoded into Go values: those cannot represent every CBOR
// key (byte strings, bignums, arrays and maps are not comparable Go values;
// null and undefined would both become nil; tag 1 becomes a time, refused if
// its content is not a number), and the decoder strips a self-describe tag,
// which would let 55799("directory_version") pass for the text key itself.
// Walking and checking are one iterative pass (see cborItemEnd), so depth
// costs heap, not goroutine stack, and no shape of body costs more than a
// pass over its bytes.
//
// A key that appears twice is refused, so no two readers of one document
// disagree about a value: a text key by its text, so every encoding of
// directory_version is one key, and any other key by its encoded bytes.
func topLevelMap(lim cborLimits, body []byte) (map[string][]byte, bool) {
	if len(body) == 0 || body[0]>>5 != 5 {
		return nil, false
	}
	count, next, ok := cborHead(body, 0)
	indefinite := body[0]&0x1f == 31
	if !ok || (!indefinite && (count > uint64(lim.MaxMapPairs) || count > uint64(len(body)-next)/2)) {
		return nil, false
	}
	// Each key and value is checked as it is walked, one pass in all.
	off := next
	item := func() ([]byte, bool) {
		end, ok := cborItemEnd(body, off, 1, lim)
		if !ok {
			return nil, false
		}
		b := body[off:end]
		off = end
		return b, true
	}
	texts := map[string][]byte{}
	others := map[string]bool{}
	for i := uint64(0); ; i++ {
		if !indefinite && i == count {
			break
		}
		if indefinite {
			if off >= len(body) {
				return nil, false
			}
			if body[off] == 0xff {
				off++
				break
			}
			if i >= uint64(lim.MaxMapPairs) {
				return nil, false
			}
		}
		key, ok := item()
		if !ok {
			return nil, false
		}
		value, ok := item()
		if !ok {
			return nil, false
		}
		if key[0]>>5 != 3 {
			if others[string(key)] {
				return nil, false
			}
			others[string(key)] = true
			continue
		}
		text := cborText(key)
		if _, dup := texts[text]; dup {
			return nil, false
		}
		texts[text] = value
	}
	return texts, off == len(body)
}

// cborText returns the content of the well-formed text string t, joining
// the chunks of an indefinite one. Its bytes need not be valid UTF-8: a key
// that is not is never one the server reads, so, like any key it does not
// read, it only has to be well-formed.
func cborText(t []byte) string {
	n, off, _ := cborHead(t, 0)
	if t[0]&0x1f != 31 {
		return string(t[off : off+int(n)])
	}
	var text []byte
	for t[off] != 0xff {
		n, next, _ := cborHead(t, off)
		text = append(text, t[next:next+int(n)]...)
		off = next + int(n)
	}
	return string(text)
}

// mustDecMode builds a decoding mode at start-up. Options out of the
// library's range are a programming error, and ignoring it would leave a nil
// mode to fail at the first request.
func mustDecMode(opts cbor.DecOptions) cbor.DecMode {
	dm, err := opts.DecMode()
	if err != nil {
		panic("server: invalid CBOR decoding options: " + err.Error())
	}
	return dm
}
