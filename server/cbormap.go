package server

import (
	"bytes"
	"encoding/binary"

	"github.com/fxamacker/cbor/v2"
)

// topLevelMap reads a CBOR document that the server stores verbatim and of
// which it reads only a few text keys (a device directory, an upgrade
// intent). body must be exactly one well-formed data item under dm's limits
// whose top level is a map: major type 5 in its initial byte, so a map inside
// a tag (such as self-describe, 55799) is refused, being a tag, not a map.
//
// It returns the encoded values of the text keys by their text. Keys of
// every other type are skipped, whatever they hold. The map is walked item by
// item rather than decoded into Go values: those cannot represent every CBOR
// key (byte strings, bignums, arrays and maps are not comparable Go values;
// null and undefined would both become nil; tag 1 becomes a time, refused if
// its content is not a number), and the decoder strips a self-describe tag,
// which would let 55799("directory_version") pass for the text key itself.
//
// A key that appears twice is refused, so no two readers of one document
// disagree about a value: a text key by its text, so every encoding of
// directory_version is one key, and any other key by its encoded bytes.
func topLevelMap(dm cbor.DecMode, body []byte) (map[string][]byte, bool) {
	if dm.Wellformed(body) != nil || body[0]>>5 != 5 {
		return nil, false
	}
	count, indefinite, entries := mapHead(body)
	items := dm.NewDecoder(bytes.NewReader(entries))
	next := func() ([]byte, bool) {
		start := items.NumBytesRead()
		if items.Skip() != nil {
			return nil, false
		}
		return entries[start:items.NumBytesRead()], true
	}
	texts := map[string][]byte{}
	others := map[string]bool{}
	for i := uint64(0); (indefinite && entries[items.NumBytesRead()] != 0xff) || (!indefinite && i < count); i++ {
		key, ok := next()
		if !ok {
			return nil, false
		}
		value, ok := next()
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
		var text string
		if err := textKeyMode.Unmarshal(key, &text); err != nil {
			return nil, false
		}
		if _, dup := texts[text]; dup {
			return nil, false
		}
		texts[text] = value
	}
	return texts, true
}

// textKeyMode decodes a text key whatever its bytes: one that is not valid
// UTF-8 is never a key the server reads, so, like any key it does not read,
// it only has to be well-formed.
var textKeyMode = mustDecMode(cbor.DecOptions{UTF8: cbor.UTF8DecodeInvalid})

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

// mapHead reads the head of the well-formed map that b starts with: its
// entry count, or indefinite for a map that ends with a break byte, and the
// bytes after the head. Additional information 28 to 30 never reaches it:
// those heads are not well-formed.
func mapHead(b []byte) (count uint64, indefinite bool, rest []byte) {
	switch ai := b[0] & 0x1f; {
	case ai < 24:
		return uint64(ai), false, b[1:]
	case ai == 24:
		return uint64(b[1]), false, b[2:]
	case ai == 25:
		return uint64(binary.BigEndian.Uint16(b[1:])), false, b[3:]
	case ai == 26:
		return uint64(binary.BigEndian.Uint32(b[1:])), false, b[5:]
	case ai == 27:
		return binary.BigEndian.Uint64(b[1:]), false, b[9:]
	default:
		return 0, true, b[1:]
	}
}
