package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sealbox/kv"
)

// TestCompactCommand: compact refuses while a server runs on the data
// directory (through its socket) or another process holds the store, and
// says so; with the server stopped it compacts, reports both sizes and how
// to delete the old file, and the server starts again on the result with
// every account. On PostgreSQL it says autovacuum does this and does
// nothing.
func TestCompactCommand(t *testing.T) {
	dir := t.TempDir()
	_, stop := runServe(t, dir)
	for _, email := range []string{"a@example.org", "b@example.org"} {
		mustCLI(t, "correct horse battery staple\n", "users", "add", email, "--password-stdin", "--data", dir)
	}
	_, _, err := runCLI(t, "", "compact", "--data", dir)
	if err == nil || !strings.Contains(err.Error(), "a server is running") || !strings.Contains(err.Error(), "stop it") {
		t.Fatalf("compact while the server runs: %v", err)
	}
	stop()

	s, err := kv.Open(filepath.Join(dir, dbFile), kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = runCLI(t, "", "compact", "--data", dir)
	s.Close()
	if err == nil || !strings.Contains(err.Error(), "held by another process") {
		t.Fatalf("compact while another process holds the store: %v", err)
	}

	out, _ := mustCLI(t, "", "compact", "--data", dir)
	old := filepath.Join(dir, dbFile+".old")
	if !strings.Contains(out, "compacted "+filepath.Join(dir, dbFile)) || !strings.Contains(out, "before") || !strings.Contains(out, "rm "+old) {
		t.Fatalf("compact said %q", out)
	}
	if _, err := os.Stat(old); err != nil {
		t.Fatalf("the old store is not kept: %v", err)
	}
	startServe(t, dir)
	if users := usersJSON(t, dir); len(users) != 2 {
		t.Fatalf("after compaction the server has %d users, want 2", len(users))
	}

	if _, _, err := runCLI(t, "", "compact", "--data", t.TempDir()); err == nil || !strings.Contains(err.Error(), "holds no sealbox store") {
		t.Fatalf("compact of a directory without a store: %v", err)
	}
	empty := t.TempDir()
	out, _ = mustCLI(t, "", "compact", "--data", empty, "--store", "postgres://sealbox@127.0.0.1:1/sealbox")
	if !strings.Contains(out, "autovacuum") {
		t.Fatalf("compact on PostgreSQL said %q", out)
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Fatalf("compact on PostgreSQL wrote %d files", len(entries))
	}
}
