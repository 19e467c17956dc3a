package blobs

import (
	"errors"
	"io"
)

// WholeFiles reads and removes an engine's small blob files whole, as the
// store's move of small blobs inline asks (kv.FileBlobs, which this package
// does not import).
type WholeFiles struct{ Engine }

// Read returns the bytes of the blob's file, expected to be size bytes, or
// nil, nil when there is no such file. One byte past size is read, so a
// longer file tells itself from the blob.
func (f WholeFiles) Read(hash string, size int64) ([]byte, error) {
	r, err := f.OpenSized(hash, size)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(io.LimitReader(r, size+1))
}

// Remove removes the blob's file; a file already gone is no error.
func (f WholeFiles) Remove(hash string) error {
	if err := f.Engine.Remove(hash); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}
