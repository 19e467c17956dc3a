package sealed

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

var testBlobKey = BlobKey{0x60, 0x61, 0x62}

func mustSeal(t *testing.T, k BlobKey, plain []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(k, &buf)
	if err != nil {
		t.Fatal(err)
	}
	// Odd write sizes, so chunk boundaries fall inside writes.
	for p := plain; len(p) > 0; {
		n := min(len(p), 1000+len(p)%7)
		if _, err := w.Write(p[:n]); err != nil {
			t.Fatal(err)
		}
		p = p[n:]
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// openAll opens a stream with Reader, reading with a small buffer.
func openAll(k BlobKey, sealed []byte) ([]byte, error) {
	r, err := NewReader(k, bytes.NewReader(sealed))
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	buf := make([]byte, 777)
	for {
		n, err := r.Read(buf)
		out.Write(buf[:n])
		if err == io.EOF {
			return out.Bytes(), nil
		}
		if err != nil {
			return out.Bytes(), err
		}
	}
}

// openAt opens a whole stream with ReaderAt.
func openAt(k BlobKey, sealed []byte) ([]byte, error) {
	r, err := NewReaderAt(k, bytes.NewReader(sealed), int64(len(sealed)))
	if err != nil {
		return nil, err
	}
	out := make([]byte, r.Size())
	n, err := r.ReadAt(out, 0)
	return out[:n], err
}

func TestStreamRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 15, 16, 17, ChunkSize - 1, ChunkSize, ChunkSize + 1, 2 * ChunkSize, 3*ChunkSize + 12345} {
		plain := plainRule(int64(n))
		sealed := mustSeal(t, testBlobKey, plain)
		if got, want := int64(len(sealed)), SealedSize(int64(n)); got != want {
			t.Errorf("%d bytes: sealed size %d, SealedSize says %d", n, got, want)
		}
		if size, err := PlaintextSize(int64(len(sealed))); err != nil || size != int64(n) {
			t.Errorf("%d bytes: PlaintextSize %d, %v", n, size, err)
		}
		for name, open := range map[string]func(BlobKey, []byte) ([]byte, error){"Reader": openAll, "ReaderAt": openAt} {
			got, err := open(testBlobKey, sealed)
			if err != nil || !bytes.Equal(got, plain) {
				t.Errorf("%s, %d bytes: %v, plaintext equal %v", name, n, err, bytes.Equal(got, plain))
			}
		}
	}
}

// TestWriterHoldsOneChunk checks that a Writer keeps at most one chunk:
// after 3 chunks of plaintext, 2 are written and the third waits to learn
// whether it is the last.
func TestWriterHoldsOneChunk(t *testing.T) {
	var buf bytes.Buffer
	w, _ := NewWriter(testBlobKey, &buf)
	w.Write(make([]byte, 3*ChunkSize))
	if got, want := buf.Len(), HeaderSize+2*sealedChunkSize; got != want {
		t.Errorf("after 3 chunks written, %d bytes out, want %d", got, want)
	}
	w.Close()
	if _, err := w.Write([]byte{1}); err == nil {
		t.Error("Write after Close succeeded")
	}
}

// TestStreamRefusesTampering: every change to a sealed stream is an error
// from both readers, never a short or altered plaintext.
func TestStreamRefusesTampering(t *testing.T) {
	plain := plainRule(2*ChunkSize + 100) // 3 chunks
	sealed := mustSeal(t, testBlobKey, plain)
	chunk := func(i int) []byte {
		start := HeaderSize + i*sealedChunkSize
		return sealed[start:min(start+sealedChunkSize, len(sealed))]
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	hdr := sealed[:HeaderSize]
	flip := func(at int) []byte {
		b := bytes.Clone(sealed)
		b[at] ^= 0x04
		return b
	}
	withByte := func(at int, v byte) []byte {
		b := bytes.Clone(sealed)
		b[at] = v
		return b
	}
	exact := mustSeal(t, testBlobKey, plainRule(2*ChunkSize)) // 2 full chunks
	cases := []struct {
		name    string
		sealed  []byte
		key     BlobKey
		want    error
		message string
	}{
		{"truncated by one byte", sealed[:len(sealed)-1], testBlobKey, ErrAuth, ""},
		{"last chunk dropped", sealed[:HeaderSize+2*sealedChunkSize], testBlobKey, ErrAuth, ""},
		{"only the header", hdr, testBlobKey, ErrTruncated, ""},
		{"header cut", sealed[:10], testBlobKey, ErrTruncated, ""},
		{"empty", nil, testBlobKey, ErrTruncated, ""},
		{"last chunk of 15 bytes", cat(hdr, chunk(0), chunk(1), chunk(2)[:15]), testBlobKey, ErrTruncated, ""},
		{"chunks 0 and 1 swapped", cat(hdr, chunk(1), chunk(0), chunk(2)), testBlobKey, ErrAuth, ""},
		{"chunk 1 repeated", cat(hdr, chunk(0), chunk(1), chunk(1), chunk(2)), testBlobKey, ErrAuth, ""},
		{"chunk 1 dropped", cat(hdr, chunk(0), chunk(2)), testBlobKey, ErrAuth, ""},
		{"one byte appended", cat(sealed, []byte{0}), testBlobKey, ErrAuth, ""},
		{"last chunk appended again", cat(sealed, chunk(2)), testBlobKey, ErrAuth, ""},
		// Reader fails on the chunk before (sealed as the last), ReaderAt on the size.
		{"empty chunk after full ones", cat(exact, make([]byte, tagSize)), testBlobKey, nil, ""},
		{"bit flipped in the salt", flip(12), testBlobKey, ErrAuth, ""},
		{"bit flipped in chunk 0", flip(HeaderSize + 5), testBlobKey, ErrAuth, ""},
		{"bit flipped in a tag", flip(len(sealed) - 1), testBlobKey, ErrAuth, ""},
		{"wrong key", sealed, BlobKey{1}, ErrAuth, ""},
		{"chunk size changed", withByte(7, 2), testBlobKey, ErrMalformed, ""},
		{"wrong magic", withByte(0, 'X'), testBlobKey, ErrMalformed, ""},
		{"unknown version", withByte(4, 2), testBlobKey, nil, "stream format version 2 is not supported"},
		{"unknown version, header cut", withByte(4, 9)[:7], testBlobKey, nil, "stream format version 9 is not supported"},
	}
	for _, c := range cases {
		for name, open := range map[string]func(BlobKey, []byte) ([]byte, error){"Reader": openAll, "ReaderAt": openAt} {
			got, err := open(c.key, c.sealed)
			if err == nil {
				t.Errorf("%s, %s: opened (%d bytes)", c.name, name, len(got))
				continue
			}
			if c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("%s, %s: %v, want %v", c.name, name, err, c.want)
			}
			if c.message != "" && !strings.Contains(err.Error(), c.message) {
				t.Errorf("%s, %s: %q does not say %q", c.name, name, err, c.message)
			}
			var ve *VersionError
			if c.message != "" && !errors.As(err, &ve) {
				t.Errorf("%s, %s: %v is not a *VersionError", c.name, name, err)
			}
		}
	}
}

// TestReaderReleasesOnlyAuthenticated: the chunks before a damaged one are
// returned, then the error; nothing of the damaged chunk.
func TestReaderReleasesOnlyAuthenticated(t *testing.T) {
	plain := plainRule(2 * ChunkSize)
	sealed := mustSeal(t, testBlobKey, plain)
	sealed[len(sealed)-1] ^= 1
	got, err := openAll(testBlobKey, sealed)
	if !errors.Is(err, ErrAuth) || !bytes.Equal(got, plain[:ChunkSize]) {
		t.Errorf("got %d bytes and %v, want the first chunk and ErrAuth", len(got), err)
	}
}

// TestRangeFromSpan decrypts random plaintext ranges from the header and
// the sealed span CiphertextSpan names, and nothing else (spanOnly fails the
// test on any other read).
func TestRangeFromSpan(t *testing.T) {
	const n = 3*ChunkSize + 4321
	plain := plainRule(n)
	sealed := mustSeal(t, testBlobKey, plain)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		off := rng.Int64N(n)
		length := 1 + rng.Int64N(min(n-off, 2*ChunkSize))
		spanOff, spanLen := CiphertextSpan(n, off, length)
		ra, err := NewReaderAt(testBlobKey, &spanOnly{t: t, b: sealed, off: spanOff, n: spanLen}, int64(len(sealed)))
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, length)
		if k, err := ra.ReadAt(got, off); k != len(got) || err != nil || !bytes.Equal(got, plain[off:off+length]) {
			t.Fatalf("range [%d, +%d): %d bytes, %v", off, length, k, err)
		}
	}
}

func TestReaderAtEnd(t *testing.T) {
	sealed := mustSeal(t, testBlobKey, plainRule(100))
	ra, err := NewReaderAt(testBlobKey, bytes.NewReader(sealed), int64(len(sealed)))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if n, err := ra.ReadAt(buf, 95); n != 5 || err != io.EOF {
		t.Errorf("read across the end: %d, %v; want 5, io.EOF", n, err)
	}
	if n, err := ra.ReadAt(buf, 100); n != 0 || err != io.EOF {
		t.Errorf("read at the end: %d, %v; want 0, io.EOF", n, err)
	}
	if _, err := ra.ReadAt(buf, -1); err == nil {
		t.Error("negative offset accepted")
	}
	// A size one past the stream: the last chunk cannot be read whole.
	ra, err = NewReaderAt(testBlobKey, bytes.NewReader(sealed), int64(len(sealed))+1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ra.ReadAt(buf, 95); !errors.Is(err, ErrTruncated) {
		t.Errorf("read with a size one past the stream: %v, want ErrTruncated", err)
	}
}

func TestPlaintextSizeRefusesImpossibleSizes(t *testing.T) {
	for _, s := range []int64{0, HeaderSize, HeaderSize + tagSize - 1, HeaderSize + sealedChunkSize + tagSize} {
		if _, err := PlaintextSize(s); err == nil {
			t.Errorf("PlaintextSize(%d) accepted a size no stream has", s)
		}
	}
}
