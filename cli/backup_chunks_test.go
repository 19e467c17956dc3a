package cli

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sealbox/cli/admin"
)

// TestBackupGenerationOpensReadOnly: a generation keeps its store in
// chunks, so it is no data directory: serve and every admin command that
// writes refuse it, saying to restore it, and create nothing in it; check
// and users list read it (the chunks re-assembled, each re-hashed), and a
// damaged chunk fails check, naming it.
func TestBackupGenerationOpensReadOnly(t *testing.T) {
	dir, _, _, _ := restoreFixture(t, 3)
	root := filepath.Join(t.TempDir(), "generations")
	mustCLI(t, "", "backup", root, "--keep", "2", "--data", dir)
	gen := admin.NewestGeneration(root)
	before := treeOf(t, gen)

	want := gen + " is a backup generation: its store is kept in chunks (" + admin.SnapshotIndex + "), not as " + admin.DBFile + "; restore it into a data directory first (sealbox restore " + gen + " --data NEWDIR)"
	for _, args := range [][]string{
		{"serve", "--data", gen, "--listen", "127.0.0.1:0"},
		{"gc", "--data", gen},
		{"users", "add", "--data", gen, "carol@example.org", "--password-stdin"},
	} {
		if _, _, err := runCLI(t, "correct horse battery\n", args...); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("sealbox %s: %v, want %q", strings.Join(args, " "), err, want)
		}
	}
	if out, _ := mustCLI(t, "", "users", "list", "--data", gen); !strings.Contains(out, "family@example.org") {
		t.Fatalf("users list of a generation: %q", out)
	}
	if out, _ := mustCLI(t, "", "check", "--deep", "--data", gen); !strings.HasPrefix(out, "ok:") {
		t.Fatalf("check of a generation: %q", out)
	}
	if after := treeOf(t, gen); !maps.Equal(before, after) {
		t.Fatal("reading a generation changed it")
	}

	raw, err := os.ReadFile(filepath.Join(gen, admin.SnapshotIndex))
	if err != nil {
		t.Fatal(err)
	}
	first := strings.Split(string(raw), "\n")[4]
	path := filepath.Join(gen, admin.ChunksDir, first)
	chunk, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	chunk[100] ^= 1
	if err := os.WriteFile(path, chunk, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCLI(t, "", "check", "--deep", "--data", gen); err == nil || !strings.Contains(err.Error(), "snapshot chunk "+first+" (bytes 0 to ") || !strings.Contains(err.Error(), "its bytes no longer hash to its name") {
		t.Fatalf("check of a generation with a damaged chunk: %v", err)
	}
}
