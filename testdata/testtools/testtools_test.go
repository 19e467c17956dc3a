package testtools

import (
	"strings"
	"testing"

	"golang.org/x/mod/semver"
)

// TestPinned: the tools the suites build are pinned in testdata/tools at a
// release version, which names their cached binaries; a module the file
// does not require is an error, not an empty version.
func TestPinned(t *testing.T) {
	for _, module := range []string{"github.com/versity/versitygw", "filippo.io/torchwood"} {
		v, err := Pinned(module)
		if err != nil || !semver.IsValid(v) {
			t.Errorf("Pinned(%s) = %q, %v; want a version", module, v, err)
		}
	}
	if v, err := Pinned("example.org/unpinned"); err == nil || !strings.Contains(err.Error(), "does not require") {
		t.Errorf("Pinned(example.org/unpinned) = %q, %v; want an error", v, err)
	}
}
