package blobs_test

import (
	"path/filepath"
	"testing"

	"sealbox/blobs"
	"sealbox/blobs/blobstest"
)

// TestLocalEngine holds the local store to the engine contract.
func TestLocalEngine(t *testing.T) {
	blobstest.Run(t, func(t *testing.T) (blobs.Engine, func() blobs.Engine) {
		dir := filepath.Join(t.TempDir(), "blobs")
		open := func() blobs.Engine {
			s, err := blobs.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		return open(), open
	})
}
