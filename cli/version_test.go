package cli

import (
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"testing"

	"sealbox/kv"
	"sealbox/server"
)

// TestVersionCommand: `sealbox version` and `sealbox --version` print the
// same text: the release, and the store format this binary writes.
func TestVersionCommand(t *testing.T) {
	out, _ := mustCLI(t, "", "version")
	if !strings.HasPrefix(out, "sealbox "+server.Version) {
		t.Fatalf("version: %q", out)
	}
	if want := fmt.Sprintf("store format: %d", kv.FormatVersion); !strings.Contains(out, want) {
		t.Fatalf("version does not say %q: %q", want, out)
	}
	flag, _ := mustCLI(t, "", "--version")
	if flag != out {
		t.Fatalf("--version printed %q, version %q", flag, out)
	}
}

// TestDescribeBuild: the commit and its time come from the build info, with
// uncommitted changes said; a binary built without them says so.
func TestDescribeBuild(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.26.8", Settings: []debug.BuildSetting{
		{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"},
		{Key: "vcs.revision", Value: "91842d1371781c57595266433852d5e097e4e968"},
		{Key: "vcs.time", Value: "2026-11-25T19:03:20Z"}, {Key: "vcs.modified", Value: "true"},
	}}
	got := describeBuild(info)
	for _, want := range []string{
		"commit:       91842d1371781c57595266433852d5e097e4e968 with uncommitted changes\n",
		"commit time:  2026-11-25T19:03:20Z\n",
		"built with:   go1.26.8 linux/arm64\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("describeBuild does not say %q:\n%s", want, got)
		}
	}
	if got := describeBuild(nil); !strings.Contains(got, "commit:       unknown (built without version control information)") {
		t.Errorf("without build info:\n%s", got)
	}
}

// TestChangelogNamesEveryFormat: CHANGELOG.md has a section for every store
// format up to the one this binary writes, and none beyond it.
func TestChangelogNamesEveryFormat(t *testing.T) {
	raw, err := os.ReadFile("../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	for v := 0; v <= kv.FormatVersion; v++ {
		if !strings.Contains(string(raw), fmt.Sprintf("\n## Store format %d ", v)) {
			t.Errorf("CHANGELOG.md has no section \"## Store format %d\"", v)
		}
	}
	if strings.Contains(string(raw), fmt.Sprintf("\n## Store format %d ", kv.FormatVersion+1)) {
		t.Errorf("CHANGELOG.md names format %d, which this binary does not write", kv.FormatVersion+1)
	}
}
