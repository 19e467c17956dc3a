package cli

import (
	"github.com/rs/zerolog"

	"sealbox/blobs"
	"sealbox/kv"
)

// moveInline completes store format 6 at serve's start: the blob files of
// at most inlineMax bytes move into the store (kv.Store.MoveInline), at
// once when a start with the same threshold has done it before. A start cut
// short leaves no damage and the next one carries on.
func moveInline(store *kv.Store, blobStore blobs.Engine, inlineMax int64, log zerolog.Logger) error {
	moved, err := store.MoveInline(blobs.WholeFiles{Engine: blobStore}, inlineMax)
	if moved > 0 {
		log.Info().Int("blobs", moved).Int64("inline_max", inlineMax).Msg("moved small blob files into the store")
	}
	return err
}
