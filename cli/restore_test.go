package cli

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sealbox/blobs/s3test"
	"sealbox/cli/admin"
	"sealbox/kv"
	"sealbox/kv/pgtest"
	"sealbox/server"
)

// restoreFixture serves a data directory holding n blobs of one account and
// a share link over all of them, and returns the server's URL and the data
// directory.
func restoreFixture(t *testing.T, n int) (dir string, api apiClient, token, upload string) {
	t.Helper()
	dir = t.TempDir()
	api = apiClient{t, startServe(t, dir, openRegistration)}
	token, upload = api.account("family@example.org")
	for i := range n {
		if status := api.put(token, upload, blob(i)); status != 201 {
			t.Fatalf("put %d: %d", i, status)
		}
	}
	return dir, api, token, upload
}

// readAllThrough reads blobs 0..n-1 from a server on dir through a share
// link the backup carried, and fails unless each is byte-identical.
func readAllThrough(t *testing.T, dir, link string, n int) {
	t.Helper()
	url := startServe(t, dir, func(c *server.Config) { c.ShareBurst = 1 << 20 })
	for i := range n {
		resp, err := http.Get(url + "/s/" + link + "/blob/" + hashHex(blob(i)))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Equal(got, blob(i)) {
			t.Fatalf("blob %d from the restored directory: %d, %d bytes", i, resp.StatusCode, len(got))
		}
	}
}

// TestRestoreRoundTrip: backup, restore into a new directory, and the
// restored directory serves every blob byte-identical; the backup is only
// read.
func TestRestoreRoundTrip(t *testing.T) {
	const n = 12
	dir, api, token, _ := restoreFixture(t, n)
	const link = "00000000000000000000000000000001"
	ids := make([]int, n)
	for i := range ids {
		ids[i] = i
	}
	if status, m := api.json("POST", "/v1/shares", token, shareOf(link, ids)); status != 201 {
		t.Fatalf("share: %d %v", status, m)
	}
	backup := filepath.Join(t.TempDir(), "backup")
	mustCLI(t, "", "backup", backup, "--data", dir)
	before := treeOf(t, backup)

	restored := filepath.Join(t.TempDir(), "restored")
	out, progress := mustCLI(t, "", "restore", backup, "--data", restored)
	if !strings.Contains(out, "restored "+backup+" into "+restored) || !strings.Contains(out, "12 blobs") || !strings.Contains(progress, "restore: 100%") {
		t.Fatalf("restore said %q / %q", out, progress)
	}
	if after := treeOf(t, backup); !maps.Equal(before, after) {
		t.Fatal("restore changed the backup")
	}
	if out, _ := mustCLI(t, "", "check", "--deep", "--data", restored); !strings.HasPrefix(out, "ok:") {
		t.Fatalf("check of the restored directory: %q", out)
	}
	readAllThrough(t, restored, link, n)
}

// TestRestoreRefuses: a target that holds anything, a backup that is not
// whole, a folder that is no backup and a data directory a server holds are
// refused, and each refusal leaves the target as it was and the backup
// unchanged.
func TestRestoreRefuses(t *testing.T) {
	dir, _, _, _ := restoreFixture(t, 3)
	backup := filepath.Join(t.TempDir(), "backup")
	mustCLI(t, "", "backup", backup, "--data", dir)

	nonEmpty := t.TempDir()
	os.WriteFile(filepath.Join(nonEmpty, "notes.txt"), []byte("mine"), 0o600)
	if _, _, err := runCLI(t, "", "restore", backup, "--data", nonEmpty); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("restore into a non-empty directory: %v", err)
	}
	if tree := treeOf(t, nonEmpty); len(tree) != 2 {
		t.Fatalf("the non-empty target changed: %v", tree)
	}

	damaged := func(name string, damage func(dir string)) {
		t.Run(name, func(t *testing.T) {
			bad := t.TempDir()
			copyDir(t, backup, bad)
			damage(bad)
			before := treeOf(t, bad)
			missing := filepath.Join(t.TempDir(), "restored")
			if _, _, err := runCLI(t, "", "restore", bad, "--data", missing); err == nil || !strings.Contains(err.Error(), "not whole") {
				t.Fatalf("restore of a damaged backup: %v", err)
			}
			if _, err := os.Stat(missing); !os.IsNotExist(err) {
				t.Fatalf("a refused restore left %s behind (%v)", missing, err)
			}
			empty := t.TempDir()
			if _, _, err := runCLI(t, "", "restore", bad, "--data", empty); err == nil {
				t.Fatal("restore of a damaged backup into an empty directory succeeded")
			}
			if tree := treeOf(t, empty); len(tree) != 1 {
				t.Fatalf("a refused restore left files in the empty target: %v", tree)
			}
			if after := treeOf(t, bad); !maps.Equal(before, after) {
				t.Fatal("a refused restore changed the backup")
			}
		})
	}
	damaged("a blob whose bytes changed", func(d string) {
		os.WriteFile(blobPath(d, hashHex(blob(1))), bytes.ToUpper(blob(1)), 0o600)
	})
	damaged("a missing blob", func(d string) { os.Remove(blobPath(d, hashHex(blob(2)))) })

	if _, _, err := runCLI(t, "", "restore", t.TempDir(), "--data", filepath.Join(t.TempDir(), "x")); err == nil || !strings.Contains(err.Error(), "holds no backup") {
		t.Fatalf("restore of an empty folder: %v", err)
	}
	// dir is still served by restoreFixture's server.
	if _, _, err := runCLI(t, "", "restore", dir, "--data", filepath.Join(t.TempDir(), "x")); err == nil || !strings.Contains(err.Error(), "in use by a running server") {
		t.Fatalf("restore of a live data directory: %v", err)
	}
}

// TestRestoreMigratesAnOlderBackup: a backup written before store formats
// existed is restored and migrated in the copy; the backup stays as it was.
func TestRestoreMigratesAnOlderBackup(t *testing.T) {
	backup := t.TempDir()
	copyDir(t, format0Dir, backup)
	before := treeOf(t, backup)
	restored := filepath.Join(t.TempDir(), "restored")
	_, log := mustCLI(t, "", "restore", backup, "--data", restored)
	if !strings.Contains(log, fmt.Sprintf("store format 0; migrating the copy to %d", kv.FormatVersion)) || !strings.Contains(log, "account keys") {
		t.Fatalf("restore did not say it migrates: %q", log)
	}
	if after := treeOf(t, backup); !maps.Equal(before, after) {
		t.Fatal("restore changed the older backup")
	}
	if out, _ := mustCLI(t, "", "check", "--deep", "--data", restored); !strings.HasPrefix(out, "ok:") {
		t.Fatalf("check of the restored directory: %q", out)
	}
	if got := login(t, startServe(t, restored), "alice@example.org", "correct horse battery"); got != 200 {
		t.Fatalf("login on the restored fixture: %d", got)
	}
}

// TestBackupGenerations: three backups with --keep 2 leave the two newest
// generations; each is complete and restorable on its own, the blobs they
// share are one file (hard links, not copies), and restore of the folder
// takes the newest.
func TestBackupGenerations(t *testing.T) {
	dir, api, token, upload := restoreFixture(t, 4)
	root := filepath.Join(t.TempDir(), "generations")
	var gens []string
	for round := 0; round < 3; round++ {
		if round > 0 {
			for i := 4 * round; i < 4*round+4; i++ {
				if status := api.put(token, upload, blob(i)); status != 201 {
					t.Fatalf("put %d: %d", i, status)
				}
			}
		}
		out, _ := mustCLI(t, "", "backup", root, "--keep", "2", "--data", dir)
		if round > 0 && !strings.Contains(out, "4 blobs copied") {
			t.Fatalf("round %d copied other than its 4 new blobs: %q", round, out)
		}
		if round > 0 && !strings.Contains(out, ", "+map[int]string{1: "4", 2: "8"}[round]+" linked from the previous generation") {
			t.Fatalf("round %d did not link the previous generation's blobs: %q", round, out)
		}
		gen := strings.TrimPrefix(strings.Fields(out)[3], root+string(filepath.Separator))
		gen = strings.TrimSuffix(gen, ":")
		gens = append(gens, gen)
		if round == 2 && !strings.Contains(out, "removed generation "+gens[0]) {
			t.Fatalf("the third backup did not say it removed the first: %q", out)
		}
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{admin.BackupLockFile, gens[1], gens[2]}; !slices.Equal(left, want) {
		t.Fatalf("generations left: %v, want %v", left, want)
	}
	// blob(0) was copied into the first generation and linked since.
	a, err := os.Stat(blobPath(filepath.Join(root, gens[1]), hashHex(blob(0))))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.Stat(blobPath(filepath.Join(root, gens[2]), hashHex(blob(0))))
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(a, b) {
		t.Fatal("a blob both generations hold is two files, not one linked")
	}
	for i, gen := range gens[1:] {
		gdir := filepath.Join(root, gen)
		if out, _ := mustCLI(t, "", "check", "--deep", "--data", gdir); !strings.HasPrefix(out, "ok:") {
			t.Fatalf("check of generation %s: %q", gen, out)
		}
		restored := filepath.Join(t.TempDir(), "restored")
		out, _ := mustCLI(t, "", "restore", gdir, "--data", restored)
		if want := map[int]string{0: "8 blobs", 1: "12 blobs"}[i]; !strings.Contains(out, want) {
			t.Fatalf("restore of generation %s: %q, want %s", gen, out, want)
		}
	}
	newest := filepath.Join(t.TempDir(), "newest")
	if out, _ := mustCLI(t, "", "restore", root, "--data", newest); !strings.Contains(out, "restored "+filepath.Join(root, gens[2])) {
		t.Fatalf("restore of the generations folder did not take the newest: %q", out)
	}

	if _, _, err := runCLI(t, "", "backup", root, "--data", dir); err == nil || !strings.Contains(err.Error(), "generations") {
		t.Fatalf("a plain backup into a folder of generations: %v", err)
	}
	single := filepath.Join(t.TempDir(), "single")
	mustCLI(t, "", "backup", single, "--data", dir)
	if _, _, err := runCLI(t, "", "backup", single, "--keep", "2", "--data", dir); err == nil || !strings.Contains(err.Error(), "single backup") {
		t.Fatalf("--keep into a single backup: %v", err)
	}
}

// TestRestoreStartLineIsShellQuoted: the serve command a restore prints
// reaches serve as the same arguments when pasted into a shell: an S3 URL's
// "&" does not end it (starting serve in the background without the
// region), nor does a space or a quote in the data directory split it.
func TestRestoreStartLineIsShellQuoted(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no POSIX shell")
	}
	loc := Location{
		Data:  "/srv/family's photos",
		Store: "postgres://sealbox@db.example.org/sealbox?sslmode=require&application_name=sb",
		Blobs: "s3://photos?endpoint=https://s3.example.org&region=eu-west-1",
	}
	line := serveCommand(loc)
	// The shell prints each argument serve would get, one a line.
	out, err := exec.Command(sh, "-c", "printf '%s\\n' "+strings.TrimPrefix(line, "sealbox ")).Output()
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	want := []string{"serve", "--data", loc.Data, "--store", loc.Store, "--blobs", loc.Blobs}
	if got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"); !slices.Equal(got, want) {
		t.Fatalf("the shell reads %q as %q, want %q", line, got, want)
	}
}

// flipStoredBytes changes one byte in every copy of data the store file at
// path holds, as damage on disk would: the size stays, the hash does not.
func flipStoredBytes(t *testing.T, path string, data []byte) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for at := 0; ; n++ {
		i := bytes.Index(raw[at:], data)
		if i < 0 {
			break
		}
		raw[at+i+len(data)/2] ^= 0x20
		at += i + len(data)
	}
	if n == 0 {
		t.Fatalf("%s does not hold the bytes to damage", path)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestBackupAndRestoreVerifyInlineBlobs: a blob the store keeps inline is
// re-hashed by restore (into a directory, and into engines when the run has
// them) and by backup, as check --deep does: a damaged one fails the
// command naming the blob, and leaves nothing behind.
func TestBackupAndRestoreVerifyInlineBlobs(t *testing.T) {
	dir, api, token, upload := restoreFixture(t, 1)
	shareSmallBlobs(t, api, token, upload, inlineLink, 2)
	backup := filepath.Join(t.TempDir(), "backup")
	mustCLI(t, "", "backup", backup, "--data", dir)
	flipStoredBytes(t, filepath.Join(backup, dbFile), smallBlob(1))
	want := hashHex(smallBlob(1)) + ": its inline bytes no longer hash to its name"

	target := filepath.Join(t.TempDir(), "restored")
	if _, _, err := runCLI(t, "", "restore", backup, "--data", target); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("restore of a damaged inline blob: %v, want it named", err)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("the refused restore left %s (%v)", target, err)
	}
	again := filepath.Join(t.TempDir(), "again")
	_, _, err := runCLI(t, "", "backup", again, "--data", backup)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "the backup was not written") {
		t.Fatalf("backup of a damaged inline blob: %v, want it named", err)
	}
	if hasStoreFile(again) {
		t.Fatalf("the refused backup wrote a store into %s", again)
	}
	if !pgtest.Enabled() && !s3test.Enabled() {
		return
	}
	into := engineLocation(t)
	_, _, err = runCLI(t, "", append([]string{"restore", backup}, into.args()...)...)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "nothing restored") {
		t.Fatalf("restore into engines of a damaged inline blob: %v, want it named", err)
	}
}

// hasStoreFile reports whether dir holds a store file.
func hasStoreFile(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, dbFile))
	return err == nil
}

// TestResumedRestoreRehashesLocalBlobs: a restore into PostgreSQL with the
// blobs in the data directory, interrupted and run again, re-hashes the
// blob files the first run wrote instead of trusting their size: one
// changed meanwhile is copied again from the backup.
func TestResumedRestoreRehashesLocalBlobs(t *testing.T) {
	if !pgtest.Enabled() {
		t.Skip("SEALBOX_TEST_PG is not set")
	}
	const n = 3
	dir, _, _, _ := restoreFixture(t, n)
	backup := filepath.Join(t.TempDir(), "backup")
	mustCLI(t, "", "backup", backup, "--data", dir)
	// The copy goes in hash order: the last blob unreadable stops it after
	// the first is written.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(hashHex(blob(a)), hashHex(blob(b))) })
	first, last := order[0], order[n-1]
	unreadable := blobPath(backup, hashHex(blob(last)))
	if err := os.Rename(unreadable, unreadable+".aside"); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(unreadable, 0o700)
	target := Location{Data: filepath.Join(t.TempDir(), "data"), Store: pgtest.URL(t)}
	restore := append([]string{"restore", backup}, target.args()...)
	if _, _, err := runCLI(t, "", restore...); err == nil || !strings.Contains(err.Error(), "run the same restore again") {
		t.Fatalf("an interrupted restore: %v", err)
	}
	os.Remove(unreadable)
	os.Rename(unreadable+".aside", unreadable)
	copied := blobPath(target.Data, hashHex(blob(first)))
	damaged := bytes.Clone(blob(first))
	damaged[len(damaged)/2] ^= 0x20
	if err := os.WriteFile(copied, damaged, 0o600); err != nil {
		t.Fatalf("the first run did not write %s: %v", copied, err)
	}
	mustCLI(t, "", restore...)
	if got, err := os.ReadFile(copied); err != nil || !bytes.Equal(got, blob(first)) {
		t.Fatalf("after the resumed restore %s holds %d bytes (%v), not the blob", copied, len(got), err)
	}
	if out, _ := mustCLI(t, "", append([]string{"check", "--deep"}, target.args()...)...); !strings.HasPrefix(out, "ok:") {
		t.Fatalf("check of the resumed restore: %q", out)
	}
}
