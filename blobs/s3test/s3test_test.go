package s3test

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/mod/modfile"
)

// TestVersionIsPinned: Version, which names the cached binary, is the
// version testdata/tools/go.mod requires, so a new pin is never served an
// old build.
func TestVersionIsPinned(t *testing.T) {
	path := filepath.Join("..", "..", "testdata", "tools", "go.mod")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse(path, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Require {
		if r.Mod.Path == "github.com/versity/versitygw" {
			if r.Mod.Version != Version {
				t.Fatalf("testdata/tools pins versitygw %s, s3test.Version is %s", r.Mod.Version, Version)
			}
			return
		}
	}
	t.Fatal("testdata/tools/go.mod does not require github.com/versity/versitygw")
}
