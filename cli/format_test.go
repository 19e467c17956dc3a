package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"sealbox/kv"
	"sealbox/kv/bolt"
	"sealbox/server"
)

// format0Dir is a data directory written by sealbox before store formats
// were recorded (see kv/testdata/format0).
const format0Dir = "../kv/testdata/format0"

// copyDir copies the regular files under src into dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dst, filepath.Dir(rel)), 0o700); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), raw, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestServeMigratesAnOlderStore: serve on a data directory of format 0 says
// which migrations it runs, runs them, and serves what the store held; an
// admin command that writes, and serve with --no-migrate, refuse such a
// store without writing, advising a backup by this binary first.
func TestServeMigratesAnOlderStore(t *testing.T) {
	dir := t.TempDir()
	copyDir(t, format0Dir, dir)
	before, err := os.ReadFile(filepath.Join(dir, dbFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCLI(t, "a long enough password\n", "users", "add", "carol@example.org", "--password-stdin", "--data", dir); err == nil || !strings.Contains(err.Error(), "store format 0") || !strings.Contains(err.Error(), "sealbox backup DEST") {
		t.Fatalf("users add on a format-0 store: %v", err)
	}
	if _, err := runServeCmd(t.Context(), "--data", dir, "--listen", "127.0.0.1:0", "--no-migrate"); err == nil || !strings.Contains(err.Error(), "store format 0") {
		t.Fatalf("serve --no-migrate on a format-0 store: %v", err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, dbFile)); string(after) != string(before) {
		t.Fatal("a refused open changed the store")
	}

	var log syncBuffer
	url := startServe(t, dir, func(c *server.Config) { c.Log = zerolog.New(&log) })
	out := log.String()
	if !strings.Contains(out, `"from":0`) || !strings.Contains(out, "migration: account keys") {
		t.Fatalf("serve did not say which migrations it runs: %s", out)
	}
	if !strings.Contains(out, fmt.Sprintf(`"store_format":%d`, kv.FormatVersion)) {
		t.Fatalf("the start line does not give the store format: %s", out)
	}
	const blob = "8b33191ba1fcfaa4dcdf1bf63b373237e5843128c022d55cefc873ab00be9ac6"
	resp, err := http.Get(url + "/s/00112233445566778899aabbccddeeff/blob/" + blob)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "sealed bytes of a photo" {
		t.Fatalf("the fixture's share link after migrating: %d %q", resp.StatusCode, body)
	}
	if got := login(t, url, "alice@example.org", "correct horse battery"); got != http.StatusOK {
		t.Fatalf("alice signs in after migrating: %d", got)
	}
}

// TestBackupAndCheckReadAnOlderStore: "back up with the new binary, then
// upgrade" works: check and backup read a data directory of format 0
// without migrating it (not a byte of it changes), the backup keeps the
// store's own format, and it restores (migrated in the copy).
func TestBackupAndCheckReadAnOlderStore(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	dir := t.TempDir()
	copyDir(t, format0Dir, dir)
	before, err := os.ReadFile(filepath.Join(dir, dbFile))
	if err != nil {
		t.Fatal(err)
	}
	mustCLI(t, "", "check", "--deep", "--data", dir)
	if out, _ := mustCLI(t, "", "users", "list", "--data", dir); !strings.Contains(out, "alice@example.org") {
		t.Fatalf("users list on a format-0 store: %s", out)
	}
	backup := filepath.Join(t.TempDir(), "backup")
	mustCLI(t, "", "backup", backup, "--data", dir)
	if after, _ := os.ReadFile(filepath.Join(dir, dbFile)); string(after) != string(before) {
		t.Fatal("check or backup changed the older store")
	}
	if _, err := (Location{Data: backup}).openStore(context.Background(), kv.Options{NoMigrate: true}, bolt.Options{}); err == nil || !strings.Contains(err.Error(), "store format 0") {
		t.Fatalf("the backup of a format-0 store is not of format 0: %v", err)
	}
	restored := filepath.Join(t.TempDir(), "restored")
	mustCLI(t, "", "restore", backup, "--data", restored)
	mustCLI(t, "", "check", "--deep", "--data", restored)
	if out, _ := mustCLI(t, "", "users", "list", "--data", restored); !strings.Contains(out, "alice@example.org") {
		t.Fatalf("users list on the restored backup: %s", out)
	}
}
