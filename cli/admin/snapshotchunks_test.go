package admin_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sealbox/cli/admin"
	"sealbox/kv"
	"sealbox/kv/kvtest"
)

// chunkFixture is a data directory whose store snapshot is several chunks
// of 1 MiB: accounts, and blobs held by the first of them.
func chunkFixture(t *testing.T) *admin.Ops {
	t.Helper()
	ops := dataDirOps(t)
	addAccounts(t, ops, 0, 20_000)
	return ops
}

// addAccounts adds the accounts numbered first to first+n-1, each holding
// a blob of its own.
func addAccounts(t *testing.T, ops *admin.Ops, first, n int) {
	t.Helper()
	now := time.Now()
	var held []kv.Blob
	for i := first; i < first+n; i += 500 {
		info, _, err := ops.Blobs.Put(strings.NewReader(fmt.Sprintf("blob of account %d", i)), "", 0)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, kv.Blob{Hash: info.Hash, Size: info.Size, StoredAt: now})
	}
	err := ops.Store.Bulk(func(bk *kv.Bulk) error {
		for i := first; i < first+n; i++ {
			a := &kv.Account{ID: fmt.Sprintf("%08x-3333-4000-8000-000000000000", i), Email: fmt.Sprintf("c%d@example.org", i), PasswordHash: "x", CreatedAt: now}
			if err := bk.Account(a); err != nil {
				return err
			}
		}
		for _, h := range held {
			if err := bk.Hold(fmt.Sprintf("%08x-3333-4000-8000-000000000000", first), h); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// backupGen writes a generation under root and returns its report.
func backupGen(t *testing.T, ops *admin.Ops, root string) admin.BackupReport {
	t.Helper()
	rep, err := ops.Backup(context.Background(), root, admin.BackupOptions{Keep: 7}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// indexChunks lists the chunks the index of gen names, in order.
func indexChunks(t *testing.T, gen string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(gen, admin.SnapshotIndex))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	return lines[4:]
}

// restoreOK restores src into a new directory and returns the accounts the
// restored store holds.
func restoreOK(t *testing.T, src string) int {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "restored")
	if _, err := admin.Restore(context.Background(), src, dst, admin.RestoreOptions{Files: kvtest.StoreFiles{}}, nil); err != nil {
		t.Fatalf("restore of %s: %v", src, err)
	}
	store, err := kvtest.Open(filepath.Join(dst, admin.DBFile), kv.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	users, err := store.UserSummaries()
	if err != nil {
		t.Fatal(err)
	}
	return len(users)
}

// TestBackupGenerationsShareSnapshotChunks: a second generation of an
// unchanged store writes no chunk (each is a hard link to the first's), one
// after a change writes only some, and every generation restores to its own
// state.
func TestBackupGenerationsShareSnapshotChunks(t *testing.T) {
	ops := chunkFixture(t)
	root := filepath.Join(t.TempDir(), "generations")
	first := backupGen(t, ops, root)
	if first.SnapshotChunks < 3 || first.ChunksLinked != 0 || first.ChunkBytesWritten == 0 {
		t.Fatalf("first generation: %d chunks, %d linked, %d bytes written; want 3 or more chunks, all written", first.SnapshotChunks, first.ChunksLinked, first.ChunkBytesWritten)
	}
	if _, err := os.Stat(filepath.Join(first.Dest, admin.DBFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a generation holds a whole store file beside its chunks: %v", err)
	}
	second := backupGen(t, ops, root)
	if second.ChunkBytesWritten != 0 || second.ChunksLinked == 0 {
		t.Fatalf("second generation of an unchanged store: %d linked, %d bytes written; want every chunk linked", second.ChunksLinked, second.ChunkBytesWritten)
	}
	a, b := indexChunks(t, first.Dest), indexChunks(t, second.Dest)
	if !slices.Equal(a, b) {
		t.Fatal("two snapshots of an unchanged store list other chunks")
	}
	for _, c := range a {
		fa, err := os.Stat(filepath.Join(first.Dest, admin.ChunksDir, c))
		if err != nil {
			t.Fatal(err)
		}
		fb, err := os.Stat(filepath.Join(second.Dest, admin.ChunksDir, c))
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(fa, fb) {
			t.Fatalf("chunk %s is two files, not one linked", c)
		}
	}

	addAccounts(t, ops, 20_000, 500)
	third := backupGen(t, ops, root)
	if third.ChunkBytesWritten == 0 || third.ChunksLinked == 0 {
		t.Fatalf("generation after a change: %d linked, %d bytes written; want some of each", third.ChunksLinked, third.ChunkBytesWritten)
	}
	for gen, want := range map[string]int{first.Dest: 20_000, second.Dest: 20_000, third.Dest: 20_500} {
		if got := restoreOK(t, gen); got != want {
			t.Fatalf("restore of %s: %d accounts, want %d", gen, got, want)
		}
	}
}

// TestRestoreRefusesADamagedSharedChunk: a chunk every generation shares
// is one file; damaged, it fails the restore of each of them, naming it,
// and each refused restore leaves nothing behind. A missing or truncated
// chunk and a damaged index are refused the same way.
func TestRestoreRefusesADamagedSharedChunk(t *testing.T) {
	ops := chunkFixture(t)
	root := filepath.Join(t.TempDir(), "generations")
	var gens []string
	for range 3 {
		gens = append(gens, backupGen(t, ops, root).Dest)
	}
	chunks := indexChunks(t, gens[0])
	shared := chunks[1]
	path := filepath.Join(gens[0], admin.ChunksDir, shared)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	refused := func(t *testing.T, gen, want string) {
		t.Helper()
		dst := filepath.Join(t.TempDir(), "restored")
		_, err := admin.Restore(context.Background(), gen, dst, admin.RestoreOptions{Files: kvtest.StoreFiles{}}, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("restore of %s: %v, want it refused with %q", gen, err, want)
		}
		if _, err := os.Stat(dst); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("a refused restore left %s behind (%v)", dst, err)
		}
	}

	t.Run("damaged", func(t *testing.T) {
		damaged := slices.Clone(raw)
		damaged[len(damaged)/2] ^= 0xff
		if err := os.WriteFile(path, damaged, 0o640); err != nil {
			t.Fatal(err)
		}
		defer os.WriteFile(path, raw, 0o640)
		for _, gen := range gens {
			refused(t, gen, "is not whole (1 problems), nothing restored:\n  snapshot chunk "+shared+" (bytes 1048576 to 2097152 of the store): its bytes no longer hash to its name")
		}
	})
	t.Run("truncated", func(t *testing.T) {
		if err := os.WriteFile(path, raw[:4096], 0o640); err != nil {
			t.Fatal(err)
		}
		defer os.WriteFile(path, raw, 0o640)
		for _, gen := range gens {
			refused(t, gen, "snapshot chunk "+shared+" (bytes 1048576 to 2097152 of the store): 4096 bytes, 1048576 expected")
		}
	})
	t.Run("missing", func(t *testing.T) {
		other := filepath.Join(gens[2], admin.ChunksDir, shared)
		if err := os.Remove(other); err != nil {
			t.Fatal(err)
		}
		defer os.Link(path, other)
		refused(t, gens[2], "snapshot chunk "+shared+" (bytes 1048576 to 2097152 of the store): missing")
	})
	t.Run("damaged index", func(t *testing.T) {
		index := filepath.Join(gens[1], admin.SnapshotIndex)
		orig, err := os.ReadFile(index)
		if err != nil {
			t.Fatal(err)
		}
		// Another chunk's name in the place of the first: each chunk it
		// names is whole, and only the root tells.
		bad := strings.Replace(string(orig), chunks[0]+"\n", chunks[1]+"\n", 1)
		if err := os.WriteFile(index, []byte(bad), 0o640); err != nil {
			t.Fatal(err)
		}
		defer os.WriteFile(index, orig, 0o640)
		refused(t, gens[1], index+": the snapshot index is damaged: its chunk list does not hash to its root")
	})
	for _, gen := range gens {
		restoreOK(t, gen)
	}
}

// TestBackupInterruptedKeepsGenerationsWhole: a generation backup stopped
// after its snapshot chunks were written (some linked from the previous
// generation) leaves every earlier generation as it was and restorable,
// and is no generation; the next backup removes what it left.
func TestBackupInterruptedKeepsGenerationsWhole(t *testing.T) {
	ops := chunkFixture(t)
	root := filepath.Join(t.TempDir(), "generations")
	first := backupGen(t, ops, root)
	before := filesUnder(t, root)

	addAccounts(t, ops, 20_000, 500)
	ctx, cancel := context.WithCancel(context.Background())
	_, err := ops.Backup(ctx, root, admin.BackupOptions{Keep: 7}, func(admin.Progress) { cancel() })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted backup: %v", err)
	}
	entries, _ := os.ReadDir(root)
	if len(entries) != 3 || !strings.HasPrefix(entries[0].Name(), ".partial-") || entries[1].Name() != admin.BackupLockFile {
		t.Fatalf("after an interrupted backup the folder holds %v, want the first generation, one partial and the backup lock", entries)
	}
	if newest := admin.NewestGeneration(root); newest != first.Dest {
		t.Fatalf("the newest generation is %q, want %q", newest, first.Dest)
	}
	for path, sum := range before {
		if got := filesUnder(t, root)[path]; got != sum {
			t.Fatalf("%s changed under an interrupted backup", path)
		}
	}
	if got := restoreOK(t, first.Dest); got != 20_000 {
		t.Fatalf("the first generation restored %d accounts", got)
	}
	next := backupGen(t, ops, root)
	entries, _ = os.ReadDir(root)
	if len(entries) != 3 || entries[0].Name() != admin.BackupLockFile || restoreOK(t, next.Dest) != 20_500 {
		t.Fatalf("the backup after an interrupted one: %v", entries)
	}
}

// filesUnder maps each regular file under root to the SHA-256 of its bytes.
func filesUnder(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		raw, err := os.ReadFile(path)
		sum := sha256.Sum256(raw)
		out[path] = hex.EncodeToString(sum[:])
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRestoreReadsAWholeFileGeneration: a generation written before
// snapshots were chunked (a whole store file) is still a generation: a new
// one is written after it (sharing no chunk, since it has none), and both
// restore.
func TestRestoreReadsAWholeFileGeneration(t *testing.T) {
	ops := chunkFixture(t)
	root := filepath.Join(t.TempDir(), "generations")
	old := filepath.Join(root, "2026-11-01T033000Z")
	// A backup without --keep is the same data directory an older sealbox
	// wrote as a generation.
	if _, err := ops.Backup(context.Background(), old, admin.BackupOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	if admin.NewestGeneration(root) != old {
		t.Fatalf("a whole-file generation is not listed: %q", admin.NewestGeneration(root))
	}
	addAccounts(t, ops, 20_000, 500)
	next := backupGen(t, ops, root)
	if next.ChunksLinked != 0 || next.SnapshotChunks == 0 {
		t.Fatalf("the generation after a whole-file one: %d chunks, %d linked", next.SnapshotChunks, next.ChunksLinked)
	}
	if got := restoreOK(t, old); got != 20_000 {
		t.Fatalf("the whole-file generation restored %d accounts", got)
	}
	if got := restoreOK(t, root); got != 20_500 {
		t.Fatalf("the newest generation restored %d accounts", got)
	}
}
