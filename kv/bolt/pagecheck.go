package bolt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"

	bolt "go.etcd.io/bbolt"
)

// The page check walks the file's pages as bbolt lays them out on disk
// (go.etcd.io/bbolt/internal/common: page.go, meta.go, inode.go), in the
// host's byte order as bbolt writes them. It checks what bbolt's own
// Tx.Check does: every page reachable from the root is inside the file,
// of the type its parent expects, reachable once and not free; keys are
// in order within each page and within their parent's bounds; and every
// page below the high-water mark is reachable or free. It reads each page
// with pread rather than through bbolt's map, and keeps two bits per page
// where Tx.Check keeps a map entry per page: at a million items (2.8
// million pages) that was 160 MiB of memory and the file's size mapped.

// Page layout: a 16-byte header (id uint64, flags uint16, count uint16,
// overflow uint32), then count elements of 16 bytes, each locating its key
// (and value) by an offset from the element itself.
const (
	pageHeaderSize = 16
	elementSize    = 16

	branchPage   = 0x01
	leafPage     = 0x02
	freelistPage = 0x10

	// bucketLeafFlag marks a leaf element whose value is a bucket: a
	// 16-byte header (root page, sequence) and, when root is 0, the
	// bucket's one page inline after it.
	bucketLeafFlag = 0x01
	bucketHeader   = 16

	// noFreelist is the freelist page id of a file whose freelist is not
	// written (bbolt's NoFreelistSync).
	noFreelist = ^uint64(0)
)

// maxPageProblems is how many problems the page check lists; it counts
// the rest, so a file damaged throughout costs no more memory than this.
const maxPageProblems = 1000

// maxNodeBytes bounds the node the page check reads into memory: the
// largest value sealbox stores is an inline blob of at most 1 MiB, so a
// header that claims more is damage, not a node to read.
const maxNodeBytes = 64 << 20

// pageCheck is one walk of the file as of one read transaction.
type pageCheck struct {
	r        io.ReaderAt
	pageSize int
	hwm      uint64 // pages below it are reachable or free
	seen     bitset
	free     bitset
	problems []error
	unlisted int // problems beyond maxPageProblems
	buf      []byte
}

// bitset holds one bit per page id.
type bitset []uint64

func (b bitset) has(i uint64) bool { return b[i/64]&(1<<(i%64)) != 0 }
func (b bitset) set(i uint64)      { b[i/64] |= 1 << (i % 64) }

// checkPages checks the file of tx's database as of tx.
func checkPages(tx *bolt.Tx) ([]error, error) {
	f, err := os.Open(tx.DB().Path())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pageSize := tx.DB().Info().PageSize
	c := newPageCheck(f, pageSize, uint64(tx.Size())/uint64(pageSize))
	freelist, err := c.freelistOf(uint64(tx.ID()))
	if err != nil {
		return nil, err
	}
	return c.run(uint64(tx.Cursor().Bucket().RootPage()), freelist)
}

// newPageCheck checks the file r of hwm pages of pageSize bytes.
func newPageCheck(r io.ReaderAt, pageSize int, hwm uint64) *pageCheck {
	return &pageCheck{r: r, pageSize: pageSize, hwm: hwm, seen: make(bitset, hwm/64+1), free: make(bitset, hwm/64+1)}
}

// run walks the tree from the root bucket's page root, with the freelist
// at page freelist (noFreelist: none written), and returns the problems.
func (c *pageCheck) run(root, freelist uint64) ([]error, error) {
	c.seen.set(0)
	c.seen.set(1)
	if freelist != noFreelist {
		if err := c.readFreelist(freelist); err != nil {
			return nil, err
		}
	}
	if err := c.walk(root, nil, nil); err != nil {
		return nil, err
	}
	if freelist != noFreelist {
		for id := uint64(2); id < c.hwm; id++ {
			if !c.seen.has(id) && !c.free.has(id) {
				c.report("page %d: unreachable unfreed", id)
			}
		}
	}
	if c.unlisted > 0 {
		c.problems = append(c.problems, fmt.Errorf("%d more page problems not listed", c.unlisted))
	}
	return c.problems, nil
}

func (c *pageCheck) report(format string, args ...any) {
	if len(c.problems) == maxPageProblems {
		c.unlisted++
		return
	}
	c.problems = append(c.problems, fmt.Errorf(format, args...))
}

// freelistOf returns the freelist page of the meta page written by
// transaction txid, one of the file's two. Two commits after txid, a
// writer in this process has written over that meta page (its pages stay
// as they were while tx is open): then the check goes without the
// freelist, as for a file whose freelist is not written.
//
// A meta page holds, after the page header: magic, version, page size and
// flags (uint32 each), then the root bucket (root page, sequence), the
// freelist page, the high-water mark, the txid and a checksum (uint64
// each).
func (c *pageCheck) freelistOf(txid uint64) (uint64, error) {
	for id := range uint64(2) {
		p, err := c.read(id, 1)
		if err != nil {
			return 0, err
		}
		meta := p[pageHeaderSize:]
		if binary.NativeEndian.Uint64(meta[48:]) == txid {
			return binary.NativeEndian.Uint64(meta[32:]), nil
		}
	}
	return noFreelist, nil
}

// readFreelist marks the pages the freelist page lists (free, and pending
// release by older readers) and the freelist's own pages as seen.
func (c *pageCheck) readFreelist(id uint64) error {
	if !c.mark(id, 0) {
		return nil
	}
	p, err := c.node(id)
	if err != nil || p == nil {
		return err
	}
	if flags(p) != freelistPage {
		c.report("page %d: the freelist is a page of type %#x", id, flags(p))
		return nil
	}
	c.markOverflow(id, p)
	n, ids := uint64(count(p)), p[pageHeaderSize:]
	if n == 0xFFFF {
		n, ids = binary.NativeEndian.Uint64(ids), ids[8:]
	}
	if n*8 > uint64(len(ids)) {
		c.report("page %d: the freelist lists %d pages, more than it holds", id, n)
		return nil
	}
	for i := range n {
		free := binary.NativeEndian.Uint64(ids[i*8:])
		switch {
		case free < 2 || free >= c.hwm:
			c.report("page %d: freed, outside the file's %d pages", free, c.hwm)
		case c.free.has(free):
			c.report("page %d: already freed", free)
		default:
			c.free.set(free)
		}
	}
	return nil
}

// mark records that a parent references page id (at overflow offset i of
// its node); false when it must not be read: out of the file, or reached
// before.
func (c *pageCheck) mark(id, i uint64) bool {
	switch {
	case id+i < 2 || id+i >= c.hwm:
		c.report("page %d: referenced, outside the file's %d pages", id+i, c.hwm)
		return false
	case c.seen.has(id + i):
		c.report("page %d: multiple references", id+i)
		return false
	case c.free.has(id + i):
		c.report("page %d: reachable freed", id+i)
	}
	c.seen.set(id + i)
	return true
}

// markOverflow marks the pages after the first of node p at id.
func (c *pageCheck) markOverflow(id uint64, p []byte) {
	for i := uint64(1); i <= uint64(overflow(p)); i++ {
		c.mark(id, i)
	}
}

// walk checks the node at page id, whose keys must lie in [lo, hi) (nil:
// unbounded), and what hangs below it.
func (c *pageCheck) walk(id uint64, lo, hi []byte) error {
	if !c.mark(id, 0) {
		return nil
	}
	p, err := c.node(id)
	if err != nil || p == nil {
		return err
	}
	c.markOverflow(id, p)
	if flags(p) != branchPage && flags(p) != leafPage {
		c.report("page %d: of type %#x where a branch or leaf page was expected", id, flags(p))
		return nil
	}
	// p is the reused read buffer: copy what the walk below needs.
	p = bytes.Clone(p)
	if !c.keysInOrder(id, p, lo, hi) {
		return nil
	}
	for i := range int(count(p)) {
		el := p[pageHeaderSize+i*elementSize:]
		if flags(p) == branchPage {
			childHi := hi
			if i+1 < int(count(p)) {
				childHi = key(p, i+1)
			}
			if err := c.walk(binary.NativeEndian.Uint64(el[8:]), key(p, i), childHi); err != nil {
				return err
			}
			continue
		}
		if binary.NativeEndian.Uint32(el)&bucketLeafFlag == 0 {
			continue
		}
		if err := c.bucket(id, p, i); err != nil {
			return err
		}
	}
	return nil
}

// bucket checks the bucket the leaf element i of page id (p) holds.
func (c *pageCheck) bucket(id uint64, p []byte, i int) error {
	value := value(p, i)
	if len(value) < bucketHeader {
		c.report("page %d: bucket %q has a value of %d bytes", id, key(p, i), len(value))
		return nil
	}
	root := binary.NativeEndian.Uint64(value)
	if root != 0 {
		return c.walk(root, nil, nil)
	}
	inline := value[bucketHeader:]
	if len(inline) < pageHeaderSize || flags(inline) != leafPage {
		c.report("page %d: inline bucket %q is not a leaf page", id, key(p, i))
		return nil
	}
	c.keysInOrder(id, inline, nil, nil)
	return nil
}

// keysInOrder reports keys of p out of order or outside [lo, hi), and
// elements that point outside p; false when p cannot be walked.
func (c *pageCheck) keysInOrder(id uint64, p, lo, hi []byte) bool {
	n := int(count(p))
	if pageHeaderSize+n*elementSize > len(p) {
		c.report("page %d: %d elements do not fit its %d bytes", id, n, len(p))
		return false
	}
	var prev []byte
	for i := range n {
		if !inPage(p, i) {
			c.report("page %d: element %d points outside the page", id, i)
			return false
		}
		k := key(p, i)
		switch {
		case prev != nil && bytes.Compare(prev, k) >= 0:
			c.report("page %d: key %d (%x) is not after key %d (%x)", id, i, k, i-1, prev)
		case lo != nil && bytes.Compare(k, lo) < 0:
			c.report("page %d: key %x is before its parent's bound %x", id, k, lo)
		case hi != nil && bytes.Compare(k, hi) >= 0:
			c.report("page %d: key %x is not before its parent's next bound %x", id, k, hi)
		}
		prev = k
	}
	return true
}

// node reads the node whose first page is id, overflow pages included,
// into the reused buffer; nil when its header names more pages than the
// file has.
func (c *pageCheck) node(id uint64) ([]byte, error) {
	p, err := c.read(id, 1)
	if err != nil {
		return nil, err
	}
	n := uint64(overflow(p)) + 1
	switch {
	case id+n > c.hwm:
		c.report("page %d: %d overflow pages run past the file's %d pages", id, n-1, c.hwm)
		return nil, nil
	case n*uint64(c.pageSize) > maxNodeBytes:
		c.report("page %d: %d overflow pages, more than a node of this store holds", id, n-1)
		return nil, nil
	}
	if n == 1 {
		return p, nil
	}
	return c.read(id, n)
}

func (c *pageCheck) read(id, pages uint64) ([]byte, error) {
	size := int(pages) * c.pageSize
	if cap(c.buf) < size {
		c.buf = make([]byte, size)
	}
	c.buf = c.buf[:size]
	if _, err := c.r.ReadAt(c.buf, int64(id)*int64(c.pageSize)); err != nil {
		return nil, fmt.Errorf("read page %d: %w", id, err)
	}
	return c.buf, nil
}

func flags(p []byte) uint16    { return binary.NativeEndian.Uint16(p[8:]) }
func count(p []byte) uint16    { return binary.NativeEndian.Uint16(p[10:]) }
func overflow(p []byte) uint32 { return binary.NativeEndian.Uint32(p[12:]) }

// element returns the offset of element i of p and its key's offset and
// size; a leaf element also locates its value, right after the key.
func element(p []byte, i int) (at, pos, ksize, vsize int) {
	at = pageHeaderSize + i*elementSize
	el := p[at:]
	if flags(p) == branchPage {
		return at, int(binary.NativeEndian.Uint32(el)), int(binary.NativeEndian.Uint32(el[4:])), 0
	}
	return at, int(binary.NativeEndian.Uint32(el[4:])), int(binary.NativeEndian.Uint32(el[8:])), int(binary.NativeEndian.Uint32(el[12:]))
}

// inPage reports whether element i's key and value lie within p.
func inPage(p []byte, i int) bool {
	at, pos, ksize, vsize := element(p, i)
	return at+pos+ksize+vsize <= len(p)
}

func key(p []byte, i int) []byte {
	at, pos, ksize, _ := element(p, i)
	return p[at+pos : at+pos+ksize]
}

func value(p []byte, i int) []byte {
	at, pos, ksize, vsize := element(p, i)
	return p[at+pos+ksize : at+pos+ksize+vsize]
}
