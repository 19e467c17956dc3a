package cli

import (
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sealbox/server"
)

// fixtureBlob is the one blob of the format-0 fixture: 23 bytes, a file.
const fixtureBlob = "8b33191ba1fcfaa4dcdf1bf63b373237e5843128c022d55cefc873ab00be9ac6"

func fixtureBlobFile(dir string) string {
	return filepath.Join(dir, "blobs", fixtureBlob[:2], fixtureBlob[2:4], fixtureBlob)
}

// TestServeMovesSmallBlobsInline: on the format fixture, serve's start
// moves the blob file at or under --inline-max into the store and removes
// the file; the share link still serves it; check --deep finds nothing
// wrong and does not call it missing; a backup carries it in the snapshot
// (no file) and restores to a store that checks clean and serves it. With
// --inline-max 0 the file stays a file.
func TestServeMovesSmallBlobsInline(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	kept := t.TempDir()
	copyDir(t, format0Dir, kept)
	_, stop := runServe(t, kept, func(c *server.Config) { c.InlineMax = 0 })
	stop()
	if _, err := os.Stat(fixtureBlobFile(kept)); err != nil {
		t.Fatalf("--inline-max 0 moved the file: %v", err)
	}

	dir := t.TempDir()
	copyDir(t, format0Dir, dir)
	url, stop := runServe(t, dir)
	if _, err := os.Stat(fixtureBlobFile(dir)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the small blob's file is still there after the move: %v", err)
	}
	wantShared(t, url)
	stop()
	// A move cut short between its commit and the removal leaves the file:
	// gc collects it as unreferenced, and check does not mind it.
	leftover := fixtureBlobFile(dir)
	copyDir(t, filepath.Join(format0Dir, "blobs"), filepath.Join(dir, "blobs"))
	old := time.Now().Add(-48 * time.Hour)
	if err := os.Chtimes(leftover, old, old); err != nil {
		t.Fatal(err)
	}
	if out, _ := mustCLI(t, "", "gc", "--data", dir); !strings.Contains(out, "removed 1 unreferenced blobs") {
		t.Fatalf("gc of the file of an inline blob: %s", out)
	}
	if _, err := os.Stat(leftover); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("gc kept the file of an inline blob: %v", err)
	}
	if out, _ := mustCLI(t, "", "check", "--deep", "--data", dir); !strings.Contains(out, "all 1 referenced blobs are present and whole") {
		t.Fatalf("check --deep after the move: %s", out)
	}
	backup := filepath.Join(t.TempDir(), "backup")
	if out, _ := mustCLI(t, "", "backup", backup, "--data", dir); !strings.Contains(out, "0 blobs copied") || !strings.Contains(out, "1 inline in the snapshot") {
		t.Fatalf("backup: %s", out)
	}
	restored := filepath.Join(t.TempDir(), "restored")
	mustCLI(t, "", "restore", backup, "--data", restored)
	if out, _ := mustCLI(t, "", "check", "--deep", "--data", restored); !strings.Contains(out, "present and whole") {
		t.Fatalf("check --deep of the restored backup: %s", out)
	}
	url = startServe(t, restored)
	wantShared(t, url)
}

// wantShared reads the fixture's blob through its share link.
func wantShared(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Get(url + "/s/00112233445566778899aabbccddeeff/blob/" + fixtureBlob)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Length") != "23" {
		t.Fatalf("the fixture's share link: %d, %s bytes", resp.StatusCode, resp.Header.Get("Content-Length"))
	}
}
