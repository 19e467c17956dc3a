package admin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// validIndex is an index of a snapshot of 2.5 chunks of 4 KiB.
func validIndex() snapshotIndex {
	return snapshotIndex{Size: 10 << 10, ChunkSize: 4 << 10, Chunks: []string{
		strings.Repeat("a", 64), strings.Repeat("b", 64), strings.Repeat("a", 64),
	}}
}

// TestParseSnapshotIndexRefuses: every way an index can be wrong is
// refused, saying what is wrong; the canonical encoding parses back.
func TestParseSnapshotIndexRefuses(t *testing.T) {
	good := string(validIndex().encode())
	if x, err := parseSnapshotIndex([]byte(good)); err != nil || x.Root() != validIndex().Root() || len(x.Chunks) != 3 {
		t.Fatalf("a valid index: %v %v", x, err)
	}
	for _, tc := range []struct{ name, raw, want string }{
		{"empty", "", "does not end with a newline"},
		{"no final newline", strings.TrimSuffix(good, "\n"), "does not end with a newline"},
		{"another header", strings.Replace(good, "chunks 1", "chunks 2", 1), `its first line is not "sealbox snapshot chunks 1"`},
		{"no root", strings.Replace(good, "root ", "ROOT ", 1), "its second line is not its root hash"},
		{"negative size", strings.Replace(good, "size 10240", "size -1", 1), `"size -1" is not "size " and a number`},
		{"leading zero", strings.Replace(good, "size 10240", "size 010240", 1), `"size 010240" is not "size " and a number`},
		{"chunk size not a power of two", strings.Replace(good, "chunk-size 4096", "chunk-size 5000", 1), "declares chunks of 5000 bytes"},
		{"chunk size too large", strings.Replace(good, "chunk-size 4096", "chunk-size 134217728", 1), "declares chunks of 134217728 bytes"},
		{"a chunk too many", good + strings.Repeat("c", 64) + "\n", "lists 4 chunks, and a snapshot of 10240 bytes in chunks of 4096 has 3"},
		{"uppercase chunk", strings.Replace(good, strings.Repeat("b", 64), strings.Repeat("B", 64), 1), "chunk 1 is not a SHA-256"},
		{"chunks swapped", strings.Replace(good, strings.Repeat("a", 64)+"\n"+strings.Repeat("b", 64), strings.Repeat("b", 64)+"\n"+strings.Repeat("a", 64), 1), "its chunk list does not hash to its root"},
		{"size changed", strings.Replace(good, "size 10240", "size 10000", 1), "its chunk list does not hash to its root"},
	} {
		if _, err := parseSnapshotIndex([]byte(tc.raw)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// FuzzSnapshotIndex: the parser never panics, and what it accepts is the
// canonical encoding of what it returns, with every chunk where the size
// says.
func FuzzSnapshotIndex(f *testing.F) {
	f.Add(validIndex().encode())
	f.Add([]byte(snapshotIndexHeader + "\n"))
	f.Add(snapshotIndex{Size: 0, ChunkSize: 1 << 20}.encode())
	f.Fuzz(func(t *testing.T, raw []byte) {
		x, err := parseSnapshotIndex(raw)
		if err != nil {
			return
		}
		if !bytes.Equal(x.encode(), raw) {
			t.Fatalf("accepted a non-canonical index:\n%q\nencodes as\n%q", raw, x.encode())
		}
		if n := len(x.Chunks); n > 0 {
			if start, size := x.chunkSpan(n - 1); size <= 0 || size > x.ChunkSize || start+size != x.Size {
				t.Fatalf("the last chunk spans %d bytes from %d of a snapshot of %d", size, start, x.Size)
			}
		}
	})
}

// TestChunkHasherNamesEveryChunk: whatever sizes the writes come in, the
// hasher passes the bytes on unchanged and names each chunk (the last one
// short) by the SHA-256 of exactly its bytes, in order, also when more
// chunks are cut than it has buffers.
func TestChunkHasherNamesEveryChunk(t *testing.T) {
	const size = 4 << 10
	for _, total := range []int{1, size - 1, size, size + 1, (2*chunkWriters+3)*size + 17} {
		data := make([]byte, total)
		for i := range data {
			data[i] = byte(i * 7 / size) // each chunk differs from the next
		}
		var out bytes.Buffer
		h := newChunkHasher(&out, size)
		for rest, step := data, 1; len(rest) > 0; step = step*3 + 1 {
			n := min(step%(3*size)+1, len(rest))
			if k, err := h.Write(rest[:n]); k != n || err != nil {
				t.Fatalf("Write(%d bytes) = %d, %v", n, k, err)
			}
			rest = rest[n:]
		}
		names := h.finish()
		if !bytes.Equal(out.Bytes(), data) {
			t.Fatalf("%d bytes: the bytes passed on differ from those written", total)
		}
		want := (total + size - 1) / size
		if len(names) != want {
			t.Fatalf("%d bytes: %d names, want %d", total, len(names), want)
		}
		for i, name := range names {
			chunk := data[i*size : min((i+1)*size, total)]
			if sum := sha256.Sum256(chunk); name != hex.EncodeToString(sum[:]) {
				t.Errorf("%d bytes: chunk %d named %s, not the SHA-256 of its bytes", total, i, name)
			}
		}
	}
}
