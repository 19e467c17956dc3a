package cli

import (
	"errors"
	"io"

	"github.com/rs/zerolog"

	"sealbox/blobs"
	"sealbox/kv"
)

// engineFiles is the blob engine as kv.Store.MoveInline reads and removes
// its files: kv does not import blobs.
type engineFiles struct{ e blobs.Engine }

func (f engineFiles) Read(hash string, size int64) ([]byte, error) {
	r, err := f.e.OpenSized(hash, size)
	if errors.Is(err, blobs.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer r.Close()
	// One byte past size tells a longer file from the blob.
	return io.ReadAll(io.LimitReader(r, size+1))
}

func (f engineFiles) Remove(hash string) error {
	if err := f.e.Remove(hash); err != nil && !errors.Is(err, blobs.ErrNotFound) {
		return err
	}
	return nil
}

// moveInline completes store format 6 at serve's start: the blob files of
// at most inlineMax bytes move into the store (kv.Store.MoveInline), at
// once when a start with the same threshold has done it before. A start cut
// short leaves no damage and the next one carries on.
func moveInline(store *kv.Store, blobStore blobs.Engine, inlineMax int64, log zerolog.Logger) error {
	moved, err := store.MoveInline(engineFiles{blobStore}, inlineMax)
	if moved > 0 {
		log.Info().Int("blobs", moved).Int64("inline_max", inlineMax).Msg("moved small blob files into the store")
	}
	return err
}
