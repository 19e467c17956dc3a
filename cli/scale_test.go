package cli

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sealbox/blobs/s3test"
	"sealbox/kv"
	"sealbox/kv/bolt"
	"sealbox/kv/pgtest"
	"sealbox/server"
)

// TestDevFillMakesAValidStore: a small fill holds what was asked (accounts,
// albums, ops, sessions, shares, blobs), check --deep finds nothing wrong
// with it, and a second fill of the same directory is refused, so the
// harness cannot measure a store that is not one the server could have
// made.
func TestDevFillMakesAValidStore(t *testing.T) {
	loc := Location{Data: filepath.Join(t.TempDir(), "data")}
	if pgtest.Enabled() || s3test.Enabled() {
		loc = engineLocation(t)
	}
	args := append([]string{"dev", "fill", "--items", "200", "--accounts", "3", "--albums", "4",
		"--chain-every", "10", "--chain-len", "3", "--sessions", "10", "--shares", "5",
		"--large-every", "50", "--large-size", "100KiB", "--batch", "64"}, loc.args()...)
	mustCLI(t, "", args...)

	var rep fillReport
	raw, err := os.ReadFile(filepath.Join(loc.Data, fillFile))
	if err != nil || json.Unmarshal(raw, &rep) != nil {
		t.Fatalf("fill file: %v %s", err, raw)
	}
	// 200 creates, and 3 replaces on each of the 20 assets with a chain;
	// every op stores a manifest and a metadata blob, every asset an
	// original.
	want := fillReport{Items: 200, Ops: 200 + 20*3, Blobs: 200 + 2*(200+20*3), Sessions: 10, Shares: 5}
	if rep.Items != want.Items || rep.Ops != want.Ops || rep.Blobs != want.Blobs || rep.Sessions != want.Sessions ||
		rep.Shares != want.Shares || len(rep.Accounts) != 3 {
		t.Fatalf("fill report %+v, want %+v and 3 accounts", rep, want)
	}

	out, _ := mustCLI(t, "", append([]string{"check", "--deep"}, loc.args()...)...)
	if !strings.Contains(out, fmt.Sprintf("all %d referenced blobs are present and whole", want.Blobs)) {
		t.Fatalf("check --deep: %s", out)
	}
	if _, errOut, err := runCLI(t, "", args...); err == nil || !strings.Contains(err.Error()+errOut, "empty") {
		t.Fatalf("a second fill of the same store: %v %s", err, errOut)
	}
	store, err := loc.openStore(t.Context(), kv.Options{ReadOnly: true}, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ops, albums, sessions := 0, 0, 0
	for _, a := range rep.Accounts {
		list, err := store.Albums(a.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, al := range list {
			ops += int(al.SyncSeq)
		}
		albums += len(list)
		n, err := store.UserSummary(a.Email)
		if err != nil {
			t.Fatal(err)
		}
		sessions += n.LiveSessions
	}
	if ops != want.Ops || albums != 3*4 || sessions != want.Sessions {
		t.Fatalf("the store holds %d ops in %d albums and %d sessions, want %d in 12 and %d", ops, albums, sessions, want.Ops, want.Sessions)
	}
	// Laid out as a server with the default --inline-max keeps them: the
	// four 100 KiB originals are files, every other blob is inline.
	page, err := store.Blobs("", want.Blobs+1)
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	for _, b := range page {
		if inline := b.Size <= server.DefaultConfig().InlineMax; b.Inline != inline {
			t.Fatalf("blob %s of %d bytes: inline %v, want %v", b.Hash, b.Size, b.Inline, inline)
		}
		if !b.Inline {
			files++
		}
	}
	if len(page) != want.Blobs || files != 4 {
		t.Fatalf("%d blobs recorded, %d of them files; want %d and 4", len(page), files, want.Blobs)
	}
}

// TestBackupAndRestoreCopyInPages: backup and restore copy blobs a page at
// a time (small ones read into memory and stored together, large ones
// streamed); over several pages of a filled store with large blobs, the
// restored directory passes check --deep with every blob, and a backup with
// a corrupt small blob and a missing one is refused naming both.
func TestBackupAndRestoreCopyInPages(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	mustCLI(t, "", "dev", "fill", "--data", data, "--items", "150", "--accounts", "2", "--chain-every", "0",
		"--large-every", "40", "--large-size", "100KiB", "--inline-max", "0") // every blob a file to copy
	var rep fillReport
	if raw, err := os.ReadFile(filepath.Join(data, fillFile)); err != nil || json.Unmarshal(raw, &rep) != nil {
		t.Fatalf("fill file: %v", err)
	}
	// It makes the keys a backup copies, and with the same --inline-max
	// leaves the files as files.
	_, stop := runServe(t, data, func(c *server.Config) { c.InlineMax = 0 })
	stop()
	backup, restored := filepath.Join(t.TempDir(), "backup"), filepath.Join(t.TempDir(), "restored")
	mustCLI(t, "", "backup", backup, "--data", data)
	mustCLI(t, "", "restore", backup, "--data", restored)
	out, _ := mustCLI(t, "", "check", "--deep", "--data", restored)
	if !strings.Contains(out, fmt.Sprintf("all %d referenced blobs are present and whole", rep.Blobs)) {
		t.Fatalf("check --deep of the restored directory (want %d blobs): %s", rep.Blobs, out)
	}

	acct := rep.Accounts[0]
	corrupt, missing := acct.Original, acct.Shares[0].Hash
	b, err := os.ReadFile(blobPath(backup, corrupt))
	if err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if err := os.WriteFile(blobPath(backup, corrupt), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(blobPath(backup, missing)); err != nil {
		t.Fatal(err)
	}
	again := filepath.Join(t.TempDir(), "again")
	_, errOut, err := runCLI(t, "", "restore", backup, "--data", again)
	if err == nil || !strings.Contains(err.Error()+errOut, corrupt+": its bytes no longer hash to its name") ||
		!strings.Contains(err.Error()+errOut, missing+": referenced but missing from the backup") {
		t.Fatalf("restore of a damaged backup: %v\n%s", err, errOut)
	}
	if _, err := os.Stat(filepath.Join(again, "sealbox.db")); err == nil {
		t.Fatal("a refused restore left a store behind")
	}
}

// TestCheckListsABoundedNumberOfBlobProblems: a store whose blob files are
// all gone has a problem per blob; check lists the first thousand and
// counts the rest, so its report does not grow with the store.
func TestCheckListsABoundedNumberOfBlobProblems(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	mustCLI(t, "", "dev", "fill", "--data", data, "--items", "400", "--chain-every", "0", "--shares", "0", "--large-every", "0",
		"--inline-max", "0") // every blob a file, for check to miss
	entries, err := os.ReadDir(filepath.Join(data, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && len(e.Name()) == 2 {
			if err := os.RemoveAll(filepath.Join(data, "blobs", e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	out, _, err := runCLI(t, "", "check", "--data", data)
	if err == nil {
		t.Fatal("check passed a store whose blobs are all gone")
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if got := strings.Count(out, ": referenced but missing"); got != 1000 {
		t.Fatalf("check listed %d missing blobs, want 1000 of the 1200", got)
	}
	if last := lines[len(lines)-1]; last != "problem: blobs: 200 more problems like those above, not listed" {
		t.Fatalf("last line %q, want the count of the problems not listed", last)
	}
}

// TestDevCommandsWriteOnlyWhatTheyMade: dev fill refuses a real instance
// with an account and no blob, and a store of an older format, before
// writing anything to either (no migration, no test account); dev measure
// refuses an instance without the marker fill writes at creation, and one
// whose store is not the instance the marker names, before starting it.
func TestDevCommandsWriteOnlyWhatTheyMade(t *testing.T) {
	real := t.TempDir()
	_, stop := runServe(t, real)
	stop()
	mustCLI(t, "a long enough password\n", "users", "add", "alice@example.org", "--password-stdin", "--data", real)
	old := t.TempDir()
	copyDir(t, format0Dir, old)
	for name, dir := range map[string]string{"a real instance": real, "a format-0 store": old} {
		before := treeOf(t, dir)
		_, errOut, err := runCLI(t, "", "dev", "fill", "--data", dir, "--items", "10", "--accounts", "1")
		if err == nil || !strings.Contains(err.Error(), dir+" is not empty: dev fill, a measuring tool, writes only a new, empty data directory") {
			t.Fatalf("dev fill of %s: %v %s", name, err, errOut)
		}
		if after := treeOf(t, dir); !maps.Equal(after, before) {
			t.Fatalf("a refused dev fill changed %s: %v, was %v", name, after, before)
		}
	}

	before := treeOf(t, real)
	if _, _, err := runCLI(t, "", "dev", "measure", "--data", real); err == nil || !strings.Contains(err.Error(), "was not made by sealbox dev fill (it has no dev-instance marker)") {
		t.Fatalf("dev measure of a real instance: %v", err)
	}
	if after := treeOf(t, real); !maps.Equal(after, before) {
		t.Fatalf("a refused dev measure changed the instance: %v, was %v", after, before)
	}
	writeFile(t, filepath.Join(real, devMarkerFile), []byte("00000000-0000-4000-8000-000000000000\n"))
	if _, _, err := runCLI(t, "", "dev", "measure", "--data", real); err == nil || !strings.Contains(err.Error(), "says dev fill made instance 00000000-0000-4000-8000-000000000000, but the store") {
		t.Fatalf("dev measure of a real instance with a forged marker: %v", err)
	}

	if !pgtest.Enabled() && !s3test.Enabled() {
		return
	}
	// A store or a bucket in use is refused even from a new data
	// directory.
	loc := engineLocation(t)
	_, stop = runServeAt(t, loc)
	stop()
	loc.Data = filepath.Join(t.TempDir(), "new")
	_, errOut, err := runCLI(t, "", append([]string{"dev", "fill", "--items", "10", "--accounts", "1"}, loc.args()...)...)
	if err == nil || !strings.Contains(err.Error(), "is not empty (it holds") || !strings.Contains(err.Error(), "dev fill, a measuring tool, fills only a new") {
		t.Fatalf("dev fill of a store in use: %v %s", err, errOut)
	}
}

// TestDevMeasure: dev measure serves a small fill with the binary and times
// every kind of request through the project's client (feed pages, share
// reads, op applies, sign-ins) and an admin command, printing a row each.
func TestDevMeasure(t *testing.T) {
	bin := buildBinary(t)
	data := filepath.Join(t.TempDir(), "data")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = serveEnv()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("sealbox %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("dev", "fill", "--data", data, "--items", "100", "--accounts", "2", "--albums", "2", "--sessions", "4", "--shares", "3", "--batch", "64")
	out := run("dev", "measure", "--data", data, "--samples", "3", "--sign-ins", "1", "--admin", "check", "--scratch", t.TempDir())
	for _, row := range []string{"| startup (to /readyz 200) | ", "| feed first page (500 entries) p50 / p99 | ", "| feed last page (500 entries) p50 / p99 | ",
		"| share blob read p50 / p99 | ", "| op apply (create) p50 / p99 | ", "| sign-in p50 / p99 | ", "| check --deep wall / peak RSS / peak anon RSS | "} {
		if !strings.Contains(out, row) {
			t.Errorf("dev measure printed no row %q:\n%s", row, out)
		}
	}
}
