package admin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"sealbox/blobs"
	"sealbox/kv"
	"sealbox/kv/durable"
)

// A generation (backup --keep) keeps its store snapshot in chunks, so that
// generations share what did not change between them, as they share blobs.
// The snapshot is cut into fixed chunks of snapshotChunkSize bytes (bbolt
// pages are fixed-size and a commit rewrites only the pages it touches, so
// an unchanged page range gives an identical chunk), each stored in the
// generation's ChunksDir under its SHA-256 and hard-linked from the
// previous generation when that one holds it. SnapshotIndex lists the
// chunks in order. A chunk file is only ever created, never written again:
// every generation that names it shares one inode, so damage to it is damage
// to each of them, and restore, which re-hashes every chunk, refuses each.
//
// The index is text:
//
//	sealbox snapshot chunks 1
//	root <sha256, 64 lowercase hex>
//	size <bytes of the snapshot, decimal>
//	chunk-size <bytes of every chunk but the last, decimal>
//	<sha256 of chunk 0>
//	<sha256 of chunk 1>
//	...
//
// with exactly ceil(size/chunk-size) chunk lines, every line ending in "\n",
// numbers without sign or leading zero. root is the SHA-256 of the lines
// after it (size, chunk-size and the chunks, newlines included): it names the
// snapshot (two snapshots with one root have the same bytes, chunk by
// chunk) and catches a damaged index, which could otherwise name other
// chunks that are whole.
const (
	// SnapshotIndex is the index of a generation's chunked store snapshot.
	SnapshotIndex = "sealbox.db.index"
	// ChunksDir holds the chunks a generation's index names.
	ChunksDir = "sealbox.db.chunks"

	snapshotIndexHeader = "sealbox snapshot chunks 1"
	// snapshotChunkSize is 256 bbolt pages of 4 KiB: small enough that a
	// commit's few pages change few chunks, large enough that a store of
	// 11 GiB is 11,000 files.
	snapshotChunkSize = 1 << 20
	// The chunk sizes an index may declare: whole pages of any page size
	// bbolt uses, each chunk small enough to be read into memory.
	minChunkSize = 4 << 10
	maxChunkSize = 64 << 20
	// maxIndexBytes bounds the index read (a million chunks: a snapshot of
	// a TiB at 1 MiB a chunk), so a crafted one costs little.
	maxIndexBytes = 72 << 20
)

// snapshotIndex is a parsed SnapshotIndex.
type snapshotIndex struct {
	Size      int64
	ChunkSize int64
	// Chunks are the chunks' SHA-256 in order, 64 lowercase hex each.
	Chunks []string
}

// body is what root hashes: every line but the header and root.
func (x snapshotIndex) body() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "size %d\nchunk-size %d\n", x.Size, x.ChunkSize)
	for _, c := range x.Chunks {
		b.WriteString(c)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// Root is the snapshot's own hash (see the format above).
func (x snapshotIndex) Root() string {
	sum := sha256.Sum256(x.body())
	return hex.EncodeToString(sum[:])
}

// encode is the index file's bytes; parseSnapshotIndex(x.encode()) is x.
func (x snapshotIndex) encode() []byte {
	return []byte(snapshotIndexHeader + "\nroot " + x.Root() + "\n" + string(x.body()))
}

// chunkSpan is the byte range of the snapshot that chunk i holds.
func (x snapshotIndex) chunkSpan(i int) (start, n int64) {
	start = int64(i) * x.ChunkSize
	return start, min(x.ChunkSize, x.Size-start)
}

// parseSnapshotIndex parses an index file, refusing anything but the
// canonical encoding of an index whose root matches its chunks.
func parseSnapshotIndex(raw []byte) (snapshotIndex, error) {
	var x snapshotIndex
	text, ok := strings.CutSuffix(string(raw), "\n")
	if !ok {
		return x, errors.New("not a snapshot index: it does not end with a newline")
	}
	lines := strings.Split(text, "\n")
	if len(lines) < 4 || lines[0] != snapshotIndexHeader {
		return x, fmt.Errorf("not a snapshot index (its first line is not %q)", snapshotIndexHeader)
	}
	root, ok := strings.CutPrefix(lines[1], "root ")
	if !ok || !blobs.ValidHash(root) {
		return x, errors.New("not a snapshot index: its second line is not its root hash")
	}
	var err error
	if x.Size, err = indexNumber(lines[2], "size "); err != nil {
		return x, err
	}
	if x.ChunkSize, err = indexNumber(lines[3], "chunk-size "); err != nil {
		return x, err
	}
	if x.ChunkSize < minChunkSize || x.ChunkSize > maxChunkSize || x.ChunkSize&(x.ChunkSize-1) != 0 {
		return x, fmt.Errorf("the snapshot index declares chunks of %d bytes: want a power of two from %d to %d", x.ChunkSize, minChunkSize, maxChunkSize)
	}
	chunks := lines[4:]
	want := x.Size / x.ChunkSize
	if x.Size%x.ChunkSize != 0 {
		want++
	}
	if int64(len(chunks)) != want {
		return x, fmt.Errorf("the snapshot index lists %d chunks, and a snapshot of %d bytes in chunks of %d has %d", len(chunks), x.Size, x.ChunkSize, want)
	}
	for i, c := range chunks {
		if !blobs.ValidHash(c) {
			return x, fmt.Errorf("the snapshot index's chunk %d is not a SHA-256 (64 lowercase hex characters)", i)
		}
	}
	x.Chunks = chunks
	if x.Root() != root {
		return x, errors.New("the snapshot index is damaged: its chunk list does not hash to its root")
	}
	return x, nil
}

// indexNumber parses a line "<prefix><decimal>": a canonical non-negative
// number (no sign, no leading zero).
func indexNumber(line, prefix string) (int64, error) {
	s, ok := strings.CutPrefix(line, prefix)
	n, err := strconv.ParseInt(s, 10, 64)
	if !ok || err != nil || n < 0 || strconv.FormatInt(n, 10) != s {
		return 0, fmt.Errorf("not a snapshot index: %q is not %q and a number", line, prefix)
	}
	return n, nil
}

// readSnapshotIndex reads and parses the index of the generation dir.
func readSnapshotIndex(dir string) (snapshotIndex, error) {
	path := filepath.Join(dir, SnapshotIndex)
	raw, err := readRegular(path, maxIndexBytes)
	if err != nil {
		return snapshotIndex{}, err
	}
	x, err := parseSnapshotIndex(raw)
	if err != nil {
		return x, fmt.Errorf("%s: %w", path, err)
	}
	return x, nil
}

// hasChunkedSnapshot reports whether dir holds a chunked store snapshot
// (its index, as anything: what it is is checked when it is read).
func hasChunkedSnapshot(dir string) bool {
	_, err := os.Lstat(filepath.Join(dir, SnapshotIndex))
	return err == nil
}

// hasSnapshot reports whether dir holds a backup's store: a whole file, or
// a chunked snapshot.
func hasSnapshot(dir string) bool { return hasStore(dir) || hasChunkedSnapshot(dir) }

// RefuseChunkedGeneration refuses to open dir as a data directory when it
// is a backup generation whose store is in chunks: opening it would create
// an empty store beside the backup's. Read-only admin commands read such a
// generation through OpenChunkedSnapshot instead.
func RefuseChunkedGeneration(dir string) error {
	if hasStore(dir) || !hasChunkedSnapshot(dir) {
		return nil
	}
	return fmt.Errorf("%s is a backup generation: its store is kept in chunks (%s), not as %s; restore it into a data directory first (sealbox restore %s --data NEWDIR)", dir, SnapshotIndex, DBFile, dir)
}

// IsChunkedGeneration reports whether dir is a backup generation whose
// store is in chunks and has no store file beside them.
func IsChunkedGeneration(dir string) bool { return RefuseChunkedGeneration(dir) != nil }

// OpenChunkedSnapshot opens, read-only, the store of the generation dir
// (IsChunkedGeneration): its chunks are re-assembled, each re-hashed, into a
// scratch file in a new temporary directory, which release removes. A chunk
// that is damaged or missing fails the open, naming every such chunk. The
// scratch file is opened with files.
func OpenChunkedSnapshot(dir string, opts kv.Options, files StoreFiles) (store *kv.Store, release func(), err error) {
	tmp, err := os.MkdirTemp("", "sealbox-generation-")
	if err != nil {
		return nil, nil, err
	}
	path := filepath.Join(tmp, DBFile)
	if _, err = restoreChunks(dir, path, storeMode); err == nil {
		opts.ReadOnly = true
		store, err = files.Open(path, opts)
	}
	if err != nil {
		os.RemoveAll(tmp)
		return nil, nil, err
	}
	return store, func() { store.Close(); os.RemoveAll(tmp) }, nil
}

// chunkReport says what writing a chunked snapshot cost.
type chunkReport struct {
	// Linked counts the chunks that are hard links to the previous
	// generation's, BytesWritten the bytes of those written anew. A chunk
	// the snapshot repeats (runs of empty pages) is stored, and counted,
	// once.
	Linked       int
	BytesWritten int64
}

// chunkWriters is how many chunks are hashed, and stored, at once: hashing
// runs on as many cores as there are, and storing waits on the disk, so
// more workers than cores keep both busy.
const chunkWriters = 8

// writeChunkedSnapshot writes the store's snapshot into the generation dir
// as chunks (ChunksDir, sharing prevDir's where they are the same). The
// snapshot is written whole to the file scratch, which the rest of the
// backup reads its blob records from, through a chunkHasher that names each
// chunk as it passes, so the snapshot is read once, by the store. scratch
// is removed before the generation is complete and never synced: the
// chunks and the index are the backup. It returns the index, which the
// caller writes last (writeSnapshotIndex).
//
// Each new chunk is copied out of scratch by the kernel (copy_file_range,
// through io.Copy between files), not through user space again.
func (o *Ops) writeChunkedSnapshot(dir, prevDir, scratch string) (snapshotIndex, chunkReport, error) {
	chunks := filepath.Join(dir, ChunksDir)
	if err := os.Mkdir(chunks, 0o700); err != nil {
		return snapshotIndex{}, chunkReport{}, err
	}
	prev := ""
	if prevDir != "" && hasChunkedSnapshot(prevDir) {
		prev = filepath.Join(prevDir, ChunksDir)
	}
	f, err := createTemp(scratch, storeMode)
	if err != nil {
		return snapshotIndex{}, chunkReport{}, err
	}
	h := newChunkHasher(f, snapshotChunkSize)
	size, err := o.Store.WriteSnapshot(h)
	names := h.finish()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return snapshotIndex{}, chunkReport{}, err
	}
	c := &chunker{src: scratch, dir: chunks, prev: prev, claimed: map[string]bool{},
		x: snapshotIndex{Size: size, ChunkSize: snapshotChunkSize, Chunks: names}}
	if want := (size + snapshotChunkSize - 1) / snapshotChunkSize; int64(len(names)) != want {
		return snapshotIndex{}, chunkReport{}, fmt.Errorf("snapshot of %d bytes cut into %d chunks, not %d", size, len(names), want)
	}
	if err := c.run(); err != nil {
		return snapshotIndex{}, c.rep, err
	}
	return c.x, c.rep, nil
}

// chunkHasher is the writer a snapshot is written through: it passes every
// byte on to out and cuts the stream into chunks of size bytes (the last
// one shorter), each hashed by one of chunkWriters workers while the next
// is filled. At most chunkWriters+1 chunk buffers exist: Write waits for a
// worker to free one.
type chunkHasher struct {
	out  io.Writer
	size int

	cur       []byte // the chunk being filled, nil between chunks
	next      int    // the index of the chunk being filled
	allocated int    // chunk buffers made so far
	free      chan []byte
	jobs      chan chunkJob
	workers   sync.WaitGroup

	mu    sync.Mutex
	names []string // by chunk index, grown as the workers name them
}

type chunkJob struct {
	i     int
	bytes []byte
}

func newChunkHasher(out io.Writer, size int) *chunkHasher {
	h := &chunkHasher{out: out, size: size,
		free: make(chan []byte, chunkWriters+1), jobs: make(chan chunkJob, chunkWriters)}
	for range chunkWriters {
		h.workers.Go(h.work)
	}
	return h
}

func (h *chunkHasher) Write(p []byte) (int, error) {
	n, err := h.out.Write(p)
	if err != nil {
		return n, err
	}
	for len(p) > 0 {
		if h.cur == nil {
			h.cur = h.buffer()
		}
		k := copy(h.cur[len(h.cur):h.size], p)
		h.cur = h.cur[:len(h.cur)+k]
		p = p[k:]
		if len(h.cur) == h.size {
			h.cut()
		}
	}
	return n, nil
}

// buffer is an empty chunk buffer: a freed one, or a new one while fewer
// than chunkWriters+1 exist.
func (h *chunkHasher) buffer() []byte {
	select {
	case b := <-h.free:
		return b[:0]
	default:
	}
	if h.allocated <= chunkWriters {
		h.allocated++
		return make([]byte, 0, h.size)
	}
	return (<-h.free)[:0]
}

// cut hands the filled chunk to the workers.
func (h *chunkHasher) cut() {
	h.jobs <- chunkJob{i: h.next, bytes: h.cur}
	h.next++
	h.cur = nil
}

func (h *chunkHasher) work() {
	for job := range h.jobs {
		sum := sha256.Sum256(job.bytes)
		h.free <- job.bytes
		h.mu.Lock()
		if job.i >= len(h.names) {
			h.names = append(h.names, make([]string, job.i+1-len(h.names))...)
		}
		h.names[job.i] = hex.EncodeToString(sum[:])
		h.mu.Unlock()
	}
}

// finish hashes the last, partial chunk, waits for the workers and returns
// every chunk's name in order. Called once, after the last Write, and also
// after a failed one, so that no worker outlives the snapshot.
func (h *chunkHasher) finish() []string {
	if len(h.cur) > 0 {
		h.cut()
	}
	close(h.jobs)
	h.workers.Wait()
	return h.names
}

// chunker stores the chunks of x, cut from the snapshot file src, in dir (a
// generation's ChunksDir): a hard link to prev's file of the same name when
// prev (the previous generation's ChunksDir, or "") holds it, else a new
// file. chunkWriters workers take the chunks in turn; the first to claim a
// name stores it, so a chunk repeated in the snapshot is stored once.
type chunker struct {
	src, dir, prev string
	x              snapshotIndex

	mu      sync.Mutex
	claimed map[string]bool
	written []string // the chunk files written, to be synced
	rep     chunkReport
}

// run stores every chunk, then syncs the new chunk files and dir.
func (c *chunker) run() error {
	if err := byWriters(c.work); err != nil {
		return err
	}
	if err := syncFiles(c.written); err != nil {
		return err
	}
	return durable.SyncDir(c.dir)
}

// work stores the chunks w, w+chunkWriters, … through a file descriptor of
// its own on src, whose offset the copies move.
func (c *chunker) work(w int) error {
	f, err := os.Open(c.src)
	if err != nil {
		return err
	}
	defer f.Close()
	for i := w; i < len(c.x.Chunks); i += chunkWriters {
		start, n := c.x.chunkSpan(i)
		if err := c.store(f, c.x.Chunks[i], start, n); err != nil {
			return err
		}
	}
	return nil
}

// store gives dir the chunk name, bytes start to start+n of src (read
// through f), unless another worker claimed it first.
func (c *chunker) store(f *os.File, name string, start, n int64) error {
	c.mu.Lock()
	repeated := c.claimed[name]
	c.claimed[name] = true
	c.mu.Unlock()
	if repeated {
		return nil
	}
	dst := filepath.Join(c.dir, name)
	if c.prev != "" {
		linked, err := linkChunk(filepath.Join(c.prev, name), dst, n)
		if err != nil {
			return err
		}
		if linked {
			c.mu.Lock()
			c.rep.Linked++
			c.mu.Unlock()
			return nil
		}
	}
	if err := writeChunk(dst, f, start, n); err != nil {
		return err
	}
	c.mu.Lock()
	c.written = append(c.written, dst)
	c.rep.BytesWritten += n
	c.mu.Unlock()
	return nil
}

// linkChunk hard-links the previous generation's chunk prev as dst when
// prev is a regular file of the chunk's size. Its bytes are not re-read:
// they hashed to its name when it was written, and restore re-hashes them;
// a file of another size is not shared, so a truncated chunk does not
// spread into a new generation.
func linkChunk(prev, dst string, size int64) (bool, error) {
	fi, err := os.Lstat(prev)
	if errors.Is(err, fs.ErrNotExist) || err == nil && (!fi.Mode().IsRegular() || fi.Size() != size) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := os.Link(prev, dst); err != nil {
		return false, fmt.Errorf("link snapshot chunk from the previous generation: %w", err)
	}
	return true, nil
}

// writeChunk copies bytes start to start+n of src (read through f, the
// snapshot just hashed, which nothing else writes) into the new file dst,
// not yet durably: run syncs every chunk written, once all are. A chunk is
// written under its name at once, without a temporary name, since only a
// complete generation (whose index is written after its chunks are synced)
// lends its chunks to another, and an interrupted one is removed whole.
func writeChunk(dst string, f *os.File, start, n int64) error {
	out, err := createExclusive(dst, storeMode)
	if err != nil {
		return err
	}
	if _, err = f.Seek(start, io.SeekStart); err == nil {
		var copied int64
		copied, err = io.Copy(out, io.LimitReader(f, n))
		if err == nil && copied != n {
			err = fmt.Errorf("copy snapshot chunk: %d bytes of %d", copied, n)
		}
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncFiles fsyncs every file of paths, chunkWriters at a time. Synced
// after they were all written, the files' data has mostly been written back
// already, and their metadata goes to the journal in a few commits instead
// of one commit for each file.
func syncFiles(paths []string) error {
	return byWriters(func(w int) error {
		for i := w; i < len(paths); i += chunkWriters {
			if err := syncFile(paths[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// byWriters runs work(0) … work(chunkWriters-1) at once and returns their
// errors joined once all have returned.
func byWriters(work func(w int) error) error {
	errs := make([]error, chunkWriters)
	var wg sync.WaitGroup
	for w := range chunkWriters {
		wg.Go(func() { errs[w] = work(w) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return durable.Close(f, nil)
}

// sameSnapshot reports whether x is the snapshot the generation prevDir
// holds, byte for byte: its index has x's root.
func sameSnapshot(prevDir string, x snapshotIndex) bool {
	if prevDir == "" || !hasChunkedSnapshot(prevDir) {
		return false
	}
	prev, err := readSnapshotIndex(prevDir)
	return err == nil && prev.Root() == x.Root()
}

// writeSnapshotIndex writes x as dir's SnapshotIndex, durably.
func writeSnapshotIndex(dir string, x snapshotIndex) error {
	return writeFileAtomic(filepath.Join(dir, SnapshotIndex), x.encode(), storeMode)
}

// restoreChunks re-assembles the chunked snapshot of the generation src
// into the new file dst (created with mode, never over anything), re-hashing
// every chunk, and syncs it. A damaged, missing or mis-sized chunk is a
// problem of the backup: every chunk is checked, and the error names each
// bad one (up to maxRestoreProblems) with the bytes of the snapshot it
// held. The index's root is returned: it names the snapshot restored.
func restoreChunks(src, dst string, mode fs.FileMode) (string, error) {
	x, err := readSnapshotIndex(src)
	if err != nil {
		return "", err
	}
	// createExclusive, read-write: each chunk is read back once written.
	f, err := os.OpenFile(dst, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return "", err
	}
	problems, err := assembleChunks(src, x, f)
	err = durable.Close(f, err)
	if err == nil {
		err = notWhole(src, problems, "nothing restored")
	}
	if err != nil {
		os.Remove(dst)
		return "", err
	}
	return x.Root(), nil
}

// assembleChunks writes the chunks x lists, from src's ChunksDir, to dst,
// and re-hashes each as dst then holds it; once one is bad, the rest are
// only checked. It returns the problems found; err is for what stops the
// reading or the writing.
//
// A chunk is copied by the kernel (copy_file_range, through io.Copy) and
// read back from dst to be hashed: what is verified is what was restored,
// and the restored file's page cache is laid out as a copied store file's
// is. Written from user space in chunk-sized writes, the kernel kept it in
// large folios, and bbolt's map of the file then faulted in so much at a
// time that the restore's resident set went past its 64 MiB map budget to
// 700 MiB at 100k items.
func assembleChunks(src string, x snapshotIndex, dst *os.File) ([]string, error) {
	dir := filepath.Join(src, ChunksDir)
	buf := make([]byte, x.ChunkSize)
	var problems []string
	for i, name := range x.Chunks {
		start, n := x.chunkSpan(i)
		problem, err := checkChunk(filepath.Join(dir, name), name, buf[:n], func(f *os.File) ([]byte, error) {
			if len(problems) > 0 {
				_, err := io.ReadFull(f, buf[:n])
				return buf[:n], err
			}
			if _, err := io.Copy(dst, io.LimitReader(f, n)); err != nil {
				return nil, err
			}
			_, err := dst.ReadAt(buf[:n], start)
			return buf[:n], err
		})
		if err != nil {
			return problems, err
		}
		if problem != "" {
			problems = append(problems, fmt.Sprintf("snapshot chunk %s (bytes %d to %d of the store): %s", name, start, start+n, problem))
		}
	}
	return problems, nil
}

// checkChunk opens the chunk file path, which must be a regular file of
// len(buf) bytes, has read give its bytes (into buf), and checks that they
// hash to name; a problem of the backup is returned as a phrase, a failure
// to read as an error.
func checkChunk(path, name string, buf []byte, read func(*os.File) ([]byte, error)) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "missing", nil
	case errors.Is(err, syscall.ELOOP):
		return "a symbolic link, not a file", nil
	case err != nil:
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Sprintf("not a regular file (%s)", fi.Mode().Type()), nil
	}
	if fi.Size() != int64(len(buf)) {
		return fmt.Sprintf("%d bytes, %d expected", fi.Size(), len(buf)), nil
	}
	data, err := read(f)
	if err != nil {
		return "", fmt.Errorf("restore %s: %w", path, err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != name {
		return "its bytes no longer hash to its name", nil
	}
	return "", nil
}
