package cli

import (
	"maps"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestBackupGenerationsOnEngines: with the store in PostgreSQL and/or the
// blobs in a bucket (SEALBOX_TEST_PG, SEALBOX_TEST_S3), the snapshot is the
// records copied into a scratch bbolt file; a second generation of the
// unchanged instance writes none of its chunks again, and the newest
// generation restores and checks whole, into a directory and into the
// engines.
func TestBackupGenerationsOnEngines(t *testing.T) {
	loc := engineLocation(t)
	url, stop := runServeAt(t, loc, openRegistration)
	api := apiClient{t, url}
	token, upload := api.account("family@example.org")
	for i := range 3 {
		if status := api.put(token, upload, blob(i)); status != 201 {
			t.Fatalf("put %d: %d", i, status)
		}
	}
	stop()
	root := filepath.Join(t.TempDir(), "generations")
	backup := append([]string{"backup", root, "--keep", "2"}, loc.args()...)
	mustCLI(t, "", backup...)
	out, _ := mustCLI(t, "", backup...)
	if !strings.Contains(out, "linked from the previous generation, 0 B written)") {
		t.Fatalf("the second generation of an unchanged instance wrote chunks again: %q", out)
	}
	restored := filepath.Join(t.TempDir(), "restored")
	if out, _ := mustCLI(t, "", "restore", root, "--data", restored); !strings.Contains(out, "3 blobs") {
		t.Fatalf("restore of the newest generation: %q", out)
	}
	if out, _ := mustCLI(t, "", "check", "--deep", "--data", restored); !strings.HasPrefix(out, "ok:") {
		t.Fatalf("check of the restored generation: %q", out)
	}
	into := engineLocation(t)
	mustCLI(t, "", append([]string{"restore", root}, into.args()...)...)
	if out, _ := mustCLI(t, "", append([]string{"check", "--deep"}, into.args()...)...); !strings.HasPrefix(out, "ok:") {
		t.Fatalf("check of the generation restored into the engines: %q", out)
	}
}

// TestBackupGenerationRehashesChangedInlineBlobs: a generation whose
// snapshot is the previous one's, byte for byte, does not re-hash the
// inline blobs that one re-hashed; a snapshot that differs (here, by an
// inline blob damaged since) is re-hashed, and the damage fails the backup,
// naming the blob, before it becomes a generation.
func TestBackupGenerationRehashesChangedInlineBlobs(t *testing.T) {
	dir, api, token, upload := restoreFixture(t, 1)
	shareSmallBlobs(t, api, token, upload, inlineLink, 2)
	src := filepath.Join(t.TempDir(), "src")
	mustCLI(t, "", "backup", src, "--data", dir)
	root := filepath.Join(t.TempDir(), "generations")
	mustCLI(t, "", "backup", root, "--keep", "3", "--data", src)
	mustCLI(t, "", "backup", root, "--keep", "3", "--data", src)
	gens := treeOf(t, root)

	flipStoredBytes(t, filepath.Join(src, dbFile), smallBlob(1))
	_, _, err := runCLI(t, "", "backup", root, "--keep", "3", "--data", src)
	want := hashHex(smallBlob(1)) + ": its inline bytes no longer hash to its name"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "the backup was not written") {
		t.Fatalf("generation of a damaged inline blob: %v, want it named", err)
	}
	if newest := admin.NewestGeneration(root); gens[filepath.Base(newest)] != "dir" {
		t.Fatalf("the refused backup became generation %s", newest)
	}
	if out, _ := mustCLI(t, "", "restore", root, "--data", filepath.Join(t.TempDir(), "restored")); !strings.Contains(out, "3 blobs") {
		t.Fatalf("restore of the newest whole generation: %q", out)
	}
}

// TestBackupKilledMidGeneration: backup --keep processes killed (SIGKILL)
// at random points leave every generation completed before each kill as it
// was, byte for byte, and restorable; what a killed one left is no
// generation, and the next backup removes it.
func TestBackupKilledMidGeneration(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills it")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	url, stop := runServe(t, dir, openRegistration)
	api := apiClient{t, url}
	token, upload := api.account("family@example.org")
	for i := range 3 {
		if status := api.put(token, upload, blob(i)); status != 201 {
			t.Fatalf("put %d: %d", i, status)
		}
	}
	stop()
	root := filepath.Join(t.TempDir(), "generations")
	mustCLI(t, "", "backup", root, "--keep", "20", "--data", dir)
	rng := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), 39))
	interrupted := 0 // kills that left a partial generation
	defer func() { t.Logf("%d of 12 kills left a partial generation", interrupted) }()
	for round := range 12 {
		before := map[string]map[string]string{}
		entries, _ := os.ReadDir(root)
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), ".partial-") {
				before[e.Name()] = treeOf(t, filepath.Join(root, e.Name()))
			}
		}
		cmd := exec.Command(bin, "backup", root, "--keep", "20", "--data", dir)
		cmd.Env = serveEnv()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.IntN(80)) * time.Millisecond)
		cmd.Process.Kill()
		cmd.Wait()
		if entries, _ := os.ReadDir(root); len(entries) > 0 && strings.HasPrefix(entries[0].Name(), ".partial-") {
			interrupted++
		}
		for name, tree := range before {
			if after := treeOf(t, filepath.Join(root, name)); !maps.Equal(tree, after) {
				t.Fatalf("round %d: generation %s changed under a killed backup", round, name)
			}
		}
		restored := filepath.Join(t.TempDir(), "restored")
		if out, _ := mustCLI(t, "", "restore", root, "--data", restored); !strings.Contains(out, "3 blobs") {
			t.Fatalf("round %d: restore of the newest generation: %q", round, out)
		}
	}
	mustCLI(t, "", "backup", root, "--keep", "20", "--data", dir)
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".partial-") {
			t.Fatalf("a backup after killed ones left %s", e.Name())
		}
	}
}
