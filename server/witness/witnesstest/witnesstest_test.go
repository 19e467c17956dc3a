package witnesstest

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/mod/modfile"
)

// TestVersionIsPinned: Version, which names the cached binary, is the
// torchwood version testdata/tools/go.mod requires, so a new pin is never
// served an old build.
func TestVersionIsPinned(t *testing.T) {
	path := filepath.Join("..", "..", "..", "testdata", "tools", "go.mod")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse(path, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Require {
		if r.Mod.Path == "filippo.io/torchwood" {
			if r.Mod.Version != Version {
				t.Fatalf("testdata/tools pins torchwood %s, witnesstest.Version is %s", r.Mod.Version, Version)
			}
			return
		}
	}
	t.Fatal("testdata/tools/go.mod does not require filippo.io/torchwood")
}
