package admin

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"sealbox/blobs"
	"sealbox/kv"
)

// Backup and restore copy blobs a page at a time. Stored one by one, each
// blob pays its own file and directory flushes, and a library of a million
// items is millions of blobs of a few hundred bytes: hours of flushes. A
// page's small blobs are read and re-hashed in memory and stored by several
// PutSmall calls at once, which share their flushes; a large blob is
// streamed through Put as before.
const (
	// copyPage is how many blobs one copy step takes; copySmall the largest
	// blob read into memory, so a step holds at most copyPage*copySmall
	// bytes (16 MiB).
	copyPage  = 256
	copySmall = 64 << 10
	// copyWriters is how many PutSmall calls run at once.
	copyWriters = 8
)

// copyOutcome is what became of one blob of a copy step.
type copyOutcome int

const (
	copied copyOutcome = iota
	copyMissing
	copyCorrupt
	copyWrongSize
)

// copyResult is one blob's outcome; size is the bytes copied (or found).
type copyResult struct {
	blob    kv.Blob
	outcome copyOutcome
	size    int64
}

// copyBlobPage stores every blob of page in dst, each read through open and
// re-hashed: a blob open reports missing (blobs.ErrNotFound) or whose bytes
// do not hash to its name is not stored, and one whose size differs from
// its record is stored; each is reported as such. err is for what stops the
// copy.
func copyBlobPage(page []kv.Blob, open func(hash string) (io.ReadCloser, error), dst blobs.Engine) ([]copyResult, error) {
	results := make([]copyResult, len(page))
	errs := make([]error, copyWriters)
	var wg sync.WaitGroup
	for w := range copyWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var small [][]byte
			for i := w; i < len(page); i += copyWriters {
				var b []byte
				results[i], b, errs[w] = copyOne(page[i], open, dst)
				if errs[w] != nil {
					return
				}
				if b != nil {
					small = append(small, b)
				}
			}
			if err := dst.PutSmall(small...); err != nil {
				errs[w] = fmt.Errorf("copy blobs: %w", err)
			}
		}()
	}
	wg.Wait()
	return results, errors.Join(errs...)
}

// copyOne copies a large blob, or reads and checks a small one and returns
// its bytes for the caller to store.
func copyOne(b kv.Blob, open func(hash string) (io.ReadCloser, error), dst blobs.Engine) (copyResult, []byte, error) {
	res := copyResult{blob: b}
	f, err := open(b.Hash)
	if errors.Is(err, blobs.ErrNotFound) {
		res.outcome = copyMissing
		return res, nil, nil
	}
	if err != nil {
		return res, nil, err
	}
	defer f.Close()
	if b.Size > copySmall {
		// Put re-hashes what it copies: a corrupted source blob fails here
		// instead of spreading into the copy.
		info, _, err := dst.Put(f, b.Hash, 0)
		res.size = info.Size
		switch {
		case errors.Is(err, blobs.ErrHashMismatch):
			res.outcome = copyCorrupt
		case err != nil:
			return res, nil, fmt.Errorf("copy blob %s: %w", b.Hash, err)
		case info.Size != b.Size:
			res.outcome = copyWrongSize
		}
		return res, nil, nil
	}
	data, err := io.ReadAll(io.LimitReader(f, copySmall+1))
	if err != nil {
		return res, nil, fmt.Errorf("copy blob %s: %w", b.Hash, err)
	}
	res.size = int64(len(data))
	if blobs.AddressOf(data) != b.Hash {
		res.outcome = copyCorrupt
		return res, nil, nil
	}
	if res.size != b.Size {
		res.outcome = copyWrongSize
	}
	return res, data, nil
}
