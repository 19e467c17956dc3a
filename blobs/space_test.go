package blobs_test

import (
	"os"
	"path/filepath"
	"testing"

	"sealbox/blobs"
)

// TestFreeBytes: the space left is read off the blobs' own filesystem, and
// a store whose directory is gone says so instead of reporting room.
func TestFreeBytes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "blobs")
	s, err := blobs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if free, err := s.FreeBytes(); err != nil || free <= 0 {
		t.Fatalf("FreeBytes = %d, %v; want the room left on a live filesystem", free, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if free, err := s.FreeBytes(); err == nil {
		t.Fatalf("FreeBytes of a removed directory = %d, want an error", free)
	}
}
