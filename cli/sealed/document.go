package sealed

import (
	"bytes"
	"encoding/json"
	"io"
)

// MaxDocument is the largest plaintext of a sealed JSON document (metadata
// blob, share index) a reader accepts, padding included (FORMAT.md §6.2).
const MaxDocument = 4 << 20

// paddedSize is the size a JSON document of n bytes is padded to
// (FORMAT.md §6.2): 512 bytes at least, then the next power of two up to
// 64 KiB, then the next multiple of 64 KiB.
func paddedSize(n int) int {
	if n > 64<<10 {
		return (n + 64<<10 - 1) / (64 << 10) * (64 << 10)
	}
	p := 512
	for p < n {
		p *= 2
	}
	return p
}

// encodeDocument writes v as compact JSON (no HTML escaping) padded with
// spaces to its bucket.
func encodeDocument(v any) ([]byte, error) {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	doc := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if paddedSize(len(doc)) > MaxDocument {
		return nil, malformed("document of %d bytes is over the %d-byte limit", len(doc), MaxDocument)
	}
	return append(doc, bytes.Repeat([]byte(" "), paddedSize(len(doc))-len(doc))...), nil
}

// decodeDocument checks a padded document (one JSON object, then only
// spaces, no key twice in any object) and returns its top-level members.
func decodeDocument(plain []byte) (map[string]json.RawMessage, error) {
	if len(plain) > MaxDocument {
		return nil, malformed("document over %d bytes", MaxDocument)
	}
	doc := bytes.TrimRight(plain, " ")
	// JSON allows other whitespace after a value; the padding is spaces
	// alone (FORMAT.md §6.2), so a tab or a newline there is refused.
	if end := bytes.TrimRight(doc, " \t\n\r"); len(end) < len(doc) {
		return nil, malformed("bytes other than spaces after the document")
	}
	if err := checkNoDuplicates(doc); err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil || m == nil {
		return nil, malformed("document is not a JSON object")
	}
	return m, nil
}

// checkNoDuplicates walks one JSON value and refuses an object with a key
// twice, and anything after the value.
func checkNoDuplicates(doc []byte) error {
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	var walk func() error
	walk = func() error {
		t, err := d.Token()
		if err != nil {
			return malformed("document is not JSON")
		}
		switch t {
		case json.Delim('{'):
			seen := map[string]bool{}
			for d.More() {
				k, err := d.Token()
				if err != nil {
					return malformed("document is not JSON")
				}
				if seen[k.(string)] {
					return malformed("document has a key twice") // not named: it is plaintext
				}
				seen[k.(string)] = true
				if err := walk(); err != nil {
					return err
				}
			}
			_, err = d.Token()
		case json.Delim('['):
			for d.More() {
				if err := walk(); err != nil {
					return err
				}
			}
			_, err = d.Token()
		}
		if err != nil {
			return malformed("document is not JSON")
		}
		return nil
	}
	if err := walk(); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return malformed("data after the document")
	}
	return nil
}

// sealBytes seals plain as one stream under k, with the given header salt.
func sealBytes(k BlobKey, plain []byte, salt [16]byte) []byte {
	var buf bytes.Buffer
	buf.Grow(int(SealedSize(int64(len(plain)))))
	w, _ := newWriter(k, &buf, salt) // a bytes.Buffer never fails a write
	w.Write(plain)
	w.Close()
	return buf.Bytes()
}

// openBytes opens a whole stream of at most max plaintext bytes.
func openBytes(k BlobKey, sealed []byte, max int64) ([]byte, error) {
	size, err := PlaintextSize(int64(len(sealed)))
	if err != nil {
		return nil, err
	}
	if size > max {
		return nil, malformed("sealed document of %d bytes is over the %d-byte limit", size, max)
	}
	r, err := NewReader(k, bytes.NewReader(sealed))
	if err != nil {
		return nil, err
	}
	plain, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return plain, nil
}

// version reads a document's "v" member, which must be 1.
func version(m map[string]json.RawMessage, object string) error {
	raw, ok := m["v"]
	if !ok {
		return malformed("%s has no version", object)
	}
	var v int
	if err := json.Unmarshal(raw, &v); err != nil {
		return malformed("%s version is not an integer", object)
	}
	if v != 1 {
		return &VersionError{Object: object, Version: v}
	}
	return nil
}
