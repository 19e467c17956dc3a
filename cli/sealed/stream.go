package sealed

import (
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
)

// ChunkSize is the plaintext size of every chunk of a stream but the last
// (FORMAT.md §4): 64 KiB. It is the manifest envelope's chunk_size.
const ChunkSize = 64 << 10

// HeaderSize is the size of a stream's header: "SBXS", version 1, chunk size
// (uint32 big-endian), 16 random salt bytes.
const HeaderSize = 4 + 1 + 4 + 16

const sealedChunkSize = ChunkSize + tagSize

var streamMagic = [4]byte{'S', 'B', 'X', 'S'}

// streamAEAD returns the AEAD of a stream whose header is hdr:
// AES-256-GCM under HKDF-SHA256(blob key, salt = the whole header,
// "sealbox/v1/stream").
func streamAEAD(k BlobKey, hdr []byte) cipher.AEAD {
	return newGCM(derive(k[:], hdr, infoStream))
}

// chunkNonce is the nonce of chunk i: an 11-byte big-endian counter, then 1
// when the chunk is the last, else 0.
func chunkNonce(i uint64, last bool) []byte {
	var n [nonceSize]byte
	binary.BigEndian.PutUint64(n[3:11], i)
	if last {
		n[11] = 1
	}
	return n[:]
}

func parseStreamHeader(hdr []byte) error {
	if len(hdr) < HeaderSize {
		if len(hdr) >= 5 {
			if err := checkHeader(hdr, streamMagic, "stream"); err != nil {
				return err
			}
		}
		return ErrTruncated
	}
	if err := checkHeader(hdr, streamMagic, "stream"); err != nil {
		return err
	}
	if c := binary.BigEndian.Uint32(hdr[5:9]); c != ChunkSize {
		return malformed("stream chunk size %d, version 1 has %d", c, ChunkSize)
	}
	return nil
}

// SealedSize returns the size of the stream that seals plain bytes:
// HeaderSize + plain + 16 per chunk, with at least one chunk.
func SealedSize(plain int64) int64 {
	return HeaderSize + plain + tagSize*chunkCount(plain)
}

func chunkCount(plain int64) int64 {
	if plain == 0 {
		return 1
	}
	return (plain + ChunkSize - 1) / ChunkSize
}

// PlaintextSize returns the plaintext size of a stream of sealed bytes, or
// ErrMalformed for a size no stream has.
func PlaintextSize(sealed int64) (int64, error) {
	body := sealed - HeaderSize
	if body < tagSize {
		return 0, ErrTruncated
	}
	n := (body + sealedChunkSize - 1) / sealedChunkSize
	last := body - (n-1)*sealedChunkSize
	if last < tagSize {
		return 0, ErrTruncated
	}
	if last == tagSize && n > 1 {
		return 0, malformed("stream ends in an empty chunk after a full one")
	}
	return body - n*tagSize, nil
}

// CiphertextSpan returns the byte range [off, off+length) of the sealed
// stream of a plainSize-byte plaintext that holds the plaintext bytes
// [plainOff, plainOff+plainLen), clipped to the plaintext: the whole chunks
// that cover it (FORMAT.md §4, random access). With the header (the first
// HeaderSize bytes) and the stream's total size, those bytes are enough to
// decrypt the range (HTTP Range, video seeking). An empty range gives length
// 0.
func CiphertextSpan(plainSize, plainOff, plainLen int64) (off, length int64) {
	plainLen = min(plainLen, plainSize-plainOff)
	if plainOff < 0 || plainLen <= 0 {
		return HeaderSize + max(plainOff, 0)/ChunkSize*sealedChunkSize, 0
	}
	first := plainOff / ChunkSize
	last := (plainOff + plainLen - 1) / ChunkSize
	off = HeaderSize + first*sealedChunkSize
	end := min(HeaderSize+(last+1)*sealedChunkSize, SealedSize(plainSize))
	return off, end - off
}

// Writer seals what is written to it as a stream (FORMAT.md §4). It holds one
// chunk in memory. Close must be called to write the last chunk; a stream
// without its last chunk is refused by every reader.
type Writer struct {
	dst     io.Writer
	aead    cipher.AEAD
	buf     []byte // plaintext waiting, at most ChunkSize
	out     []byte
	counter uint64
	err     error
}

// NewWriter writes a new stream header to dst, with a random salt, and
// returns a Writer sealing under k.
func NewWriter(k BlobKey, dst io.Writer) (*Writer, error) {
	return newWriter(k, dst, randomSalt())
}

func randomSalt() [16]byte {
	var salt [16]byte
	rand.Read(salt[:])
	return salt
}

func newWriter(k BlobKey, dst io.Writer, salt [16]byte) (*Writer, error) {
	hdr := make([]byte, 0, HeaderSize)
	hdr = append(hdr, streamMagic[:]...)
	hdr = append(hdr, 1)
	hdr = binary.BigEndian.AppendUint32(hdr, ChunkSize)
	hdr = append(hdr, salt[:]...)
	if _, err := dst.Write(hdr); err != nil {
		return nil, err
	}
	return &Writer{
		dst:  dst,
		aead: streamAEAD(k, hdr),
		buf:  make([]byte, 0, ChunkSize),
		out:  make([]byte, 0, sealedChunkSize),
	}, nil
}

// Write seals p. A full chunk is written only once more plaintext follows
// it, since only then is it known not to be the last.
func (w *Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	n := 0
	for len(p) > 0 {
		if len(w.buf) == ChunkSize {
			if err := w.flush(false); err != nil {
				return n, err
			}
		}
		c := copy(w.buf[len(w.buf):ChunkSize], p)
		w.buf = w.buf[:len(w.buf)+c]
		p = p[c:]
		n += c
	}
	return n, nil
}

// Close seals and writes the last chunk. It does not close the underlying
// writer. Writing after Close is an error.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if err := w.flush(true); err != nil {
		return err
	}
	w.err = errors.New("sealed: write to a closed stream")
	return nil
}

func (w *Writer) flush(last bool) error {
	w.out = w.aead.Seal(w.out[:0], chunkNonce(w.counter, last), w.buf, nil)
	w.counter++
	w.buf = w.buf[:0]
	if _, err := w.dst.Write(w.out); err != nil {
		w.err = err
		return err
	}
	return nil
}

// Reader decrypts a stream read from an io.Reader, one chunk in memory at a
// time. It returns plaintext only after its chunk authenticated, and an error
// (never io.EOF) when the stream is truncated, reordered, extended or
// changed.
type Reader struct {
	src     io.Reader
	aead    cipher.AEAD
	cbuf    []byte // sealed chunk, plus one byte read ahead
	ahead   bool   // cbuf[0] holds the byte read ahead of the current chunk
	pbuf    []byte // the current chunk's plaintext
	plain   []byte // the part of pbuf not yet returned
	counter uint64
	done    bool
	err     error
}

// NewReader reads a stream header from src and returns a Reader decrypting
// with k. An unknown version is a *VersionError.
func NewReader(k BlobKey, src io.Reader) (*Reader, error) {
	hdr := make([]byte, HeaderSize)
	if n, err := io.ReadFull(src, hdr); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, parseStreamHeader(hdr[:n])
		}
		return nil, err
	}
	if err := parseStreamHeader(hdr); err != nil {
		return nil, err
	}
	return &Reader{
		src:  src,
		aead: streamAEAD(k, hdr),
		cbuf: make([]byte, sealedChunkSize+1),
		pbuf: make([]byte, 0, ChunkSize),
	}, nil
}

func (r *Reader) Read(p []byte) (int, error) {
	for len(r.plain) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.done {
			return 0, io.EOF
		}
		r.err = r.next()
	}
	n := copy(p, r.plain)
	r.plain = r.plain[n:]
	return n, nil
}

// next reads and opens one chunk. A chunk is the last exactly when nothing
// follows it, which is known by reading one byte past a full chunk.
func (r *Reader) next() error {
	have := 0
	if r.ahead {
		have = 1
	}
	m, err := io.ReadFull(r.src, r.cbuf[have:])
	n := have + m
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return err
	}
	last := n <= sealedChunkSize
	if !last {
		n = sealedChunkSize
	}
	if n < tagSize {
		return ErrTruncated
	}
	if last && n == tagSize && r.counter > 0 {
		return malformed("stream ends in an empty chunk after a full one")
	}
	pt, err := r.aead.Open(r.pbuf[:0], chunkNonce(r.counter, last), r.cbuf[:n], nil)
	if err != nil {
		return ErrAuth
	}
	r.plain = pt
	r.counter++
	r.done = last
	r.ahead = !last
	if !last {
		r.cbuf[0] = r.cbuf[sealedChunkSize]
	}
	return nil
}

// ReaderAt decrypts any byte range of a stream held by an io.ReaderAt of
// known size, reading only the header and the chunks the range covers.
// Safe for concurrent use.
type ReaderAt struct {
	src    io.ReaderAt
	aead   cipher.AEAD
	sealed int64
	size   int64
	chunks int64
}

// NewReaderAt reads the header of the stream of sealedSize bytes in src.
func NewReaderAt(k BlobKey, src io.ReaderAt, sealedSize int64) (*ReaderAt, error) {
	hdr := make([]byte, HeaderSize)
	n, err := src.ReadAt(hdr, 0)
	if n < HeaderSize {
		if err != nil && err != io.EOF {
			return nil, err
		}
		return nil, parseStreamHeader(hdr[:n])
	}
	if err := parseStreamHeader(hdr); err != nil {
		return nil, err
	}
	size, err := PlaintextSize(sealedSize)
	if err != nil {
		return nil, err
	}
	r := &ReaderAt{src: src, aead: streamAEAD(k, hdr), sealed: sealedSize, size: size, chunks: chunkCount(size)}
	if size == 0 {
		// No ReadAt will ever open the one, empty chunk: open it now, so an
		// empty stream is authenticated like any other.
		tag := make([]byte, tagSize)
		if n, err := src.ReadAt(tag, HeaderSize); n < tagSize {
			if err == nil || err == io.EOF {
				err = ErrTruncated
			}
			return nil, err
		}
		if _, err := r.aead.Open(nil, chunkNonce(0, true), tag, nil); err != nil {
			return nil, ErrAuth
		}
	}
	return r, nil
}

// Size is the plaintext size.
func (r *ReaderAt) Size() int64 { return r.size }

// ReadAt decrypts plaintext bytes [off, off+len(p)). Like io.ReaderAt it
// returns io.EOF when the range reaches past the end.
func (r *ReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("sealed: negative offset")
	}
	if off >= r.size {
		if len(p) == 0 && off == r.size {
			return 0, nil
		}
		return 0, io.EOF
	}
	cbuf := make([]byte, sealedChunkSize)
	n := 0
	for n < len(p) && off < r.size {
		i := off / ChunkSize
		last := i == r.chunks-1
		clen := int64(sealedChunkSize)
		if last {
			clen = r.sealed - HeaderSize - i*sealedChunkSize
		}
		m, err := r.src.ReadAt(cbuf[:clen], HeaderSize+i*sealedChunkSize)
		if int64(m) < clen {
			if err == nil || err == io.EOF {
				err = ErrTruncated
			}
			return n, err
		}
		pt, err := r.aead.Open(cbuf[:0], chunkNonce(uint64(i), last), cbuf[:clen], nil)
		if err != nil {
			return n, ErrAuth
		}
		c := copy(p[n:], pt[off-i*ChunkSize:])
		n += c
		off += int64(c)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
