package blobs

import (
	"io"
	"os"
	"sync"

	"sealbox/kv/lru"
)

// maxIdleFiles bounds the read handles openFiles keeps between reads.
const maxIdleFiles = 256

// openFiles keeps the read handles of recently read blobs open between
// reads, so a blob read often (a photo behind a share link) costs no open, fstat and close
// each time. A blob is immutable once stored, so a handle never shows stale
// bytes; the pool only has to let go of a blob that is removed, so its disk
// space is freed, and to give each handle to one reader at a time, since a
// handle's offset is its reader's.
type openFiles struct {
	mu sync.Mutex
	// handles are the idle handles in the order they were returned.
	handles lru.List[*blobFile, struct{}]
	idle    map[string][]*blobFile // by hash
	// removals counts Remove and Collect: a handle opened before a removal
	// is closed when its reader is done instead of being kept, whichever
	// blob was removed.
	removals uint64
}

// blobFile is a blob open for reading. It embeds the *os.File, so net/http
// still sends it with sendfile (through its SyscallConn); Close hands it
// back to the store's pool.
type blobFile struct {
	*os.File
	info    Info
	store   *Dir
	removal uint64 // openFiles.removals when it was opened
	// closed is set by the reader's Close: a second Close must not put the
	// handle in the pool twice, where two readers would share its offset.
	closed bool
}

func (f *blobFile) Close() error {
	if f.closed {
		return os.ErrClosed
	}
	f.closed = true
	return f.store.files.put(f)
}

// get returns an idle handle of hash, at offset 0, or nil.
func (p *openFiles) get(hash string) *blobFile {
	p.mu.Lock()
	defer p.mu.Unlock()
	same := p.idle[hash]
	if len(same) == 0 {
		return nil
	}
	f := same[len(same)-1]
	p.removeLocked(f)
	// Its blob has not been removed since it went idle (removed closes a
	// removed blob's idle handles), so it counts as opened now.
	f.removal = p.removals
	f.closed = false
	return f
}

// put keeps f for the next reader of its blob, or closes it.
func (p *openFiles) put(f *blobFile) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return f.File.Close()
	}
	p.mu.Lock()
	if p.idle == nil {
		p.idle = map[string][]*blobFile{}
	}
	if f.removal != p.removals {
		p.mu.Unlock()
		return f.File.Close()
	}
	p.handles.Put(f, struct{}{})
	p.idle[f.info.Hash] = append(p.idle[f.info.Hash], f)
	var evicted *blobFile
	if p.handles.Len() > maxIdleFiles {
		evicted, _, _ = p.handles.Oldest()
		p.removeLocked(evicted)
	}
	p.mu.Unlock()
	if evicted != nil {
		evicted.File.Close()
	}
	return nil
}

// removeLocked takes f, an idle handle, out of the pool.
func (p *openFiles) removeLocked(f *blobFile) {
	p.handles.Remove(f)
	hash := f.info.Hash
	same := p.idle[hash]
	for i, g := range same {
		if g == f {
			same = append(same[:i], same[i+1:]...)
			break
		}
	}
	if len(same) == 0 {
		delete(p.idle, hash)
	} else {
		p.idle[hash] = same
	}
}

// removed closes the idle handles of hash, which is being removed, and
// keeps the handles now in use from returning to the pool.
func (p *openFiles) removed(hash string) {
	p.mu.Lock()
	p.removals++
	var closing []*blobFile
	for _, f := range p.idle[hash] {
		closing = append(closing, f)
		p.handles.Remove(f)
	}
	delete(p.idle, hash)
	p.mu.Unlock()
	for _, f := range closing {
		f.File.Close()
	}
}

// stamp is the removal count a handle opened now carries.
func (p *openFiles) stamp() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.removals
}
