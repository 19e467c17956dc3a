package admin_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"sealbox/blobs"
	"sealbox/cli/admin"
	"sealbox/kv"
	"sealbox/kv/kvtest"
)

// keyedOps is a data directory with a store, one blob and both key files,
// and the operations on it.
func keyedOps(t *testing.T) *admin.Ops {
	t.Helper()
	ops := dataDirOps(t)
	dir := ops.DataDir
	key := make([]byte, 32)
	rand.Read(key)
	writeFile(t, filepath.Join(dir, admin.KeyFile), key, 0o600)
	skey, vkey, err := note.GenerateKey(rand.Reader, "sealbox/test")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, admin.LogKeyFile), []byte(skey+"\n"+vkey+"\n"), 0o600)
	return ops
}

// dataDirOps is the operations on a new data directory: an empty store
// and blob store, closed when the test ends.
func dataDirOps(tb testing.TB) *admin.Ops {
	tb.Helper()
	dir := tb.TempDir()
	store, err := kvtest.Open(filepath.Join(dir, admin.DBFile), kv.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	blobStore, err := blobs.Open(filepath.Join(dir, admin.BlobsDir))
	if err != nil {
		tb.Fatal(err)
	}
	return &admin.Ops{DataDir: dir, Store: store, Blobs: blobStore, Files: kvtest.StoreFiles{}}
}

func writeFile(t *testing.T, path string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// wantKeysCopied fails unless dest holds the data directory's keys as
// regular files with no permission for group or others.
func wantKeysCopied(t *testing.T, ops *admin.Ops, dest string) {
	t.Helper()
	for _, name := range []string{admin.KeyFile, admin.LogKeyFile} {
		fi, err := os.Lstat(filepath.Join(dest, name))
		if err != nil {
			t.Fatal(err)
		}
		if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s in the backup: mode %s, want a regular file private to its owner", name, fi.Mode())
		}
		if got, want := mustRead(t, filepath.Join(dest, name)), mustRead(t, filepath.Join(ops.DataDir, name)); got != want {
			t.Errorf("%s in the backup differs from the data directory's", name)
		}
	}
	if fi, err := os.Lstat(filepath.Join(dest, admin.DBFile)); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o027 != 0 {
		t.Errorf("the store in the backup: %v, %v; want a regular file no one else may write, others may not read", fi, err)
	}
}

// TestBackupNeverWritesThroughAPlantedFile: symlinks planted at the names a
// backup writes (its temporary files and the keys) are replaced, never
// followed, so their targets keep their bytes; a planted 0666 file does not
// lend its mode to a key.
func TestBackupNeverWritesThroughAPlantedFile(t *testing.T) {
	ops := keyedOps(t)
	names := []string{admin.DBFile + ".tmp", admin.KeyFile + ".tmp", admin.LogKeyFile + ".tmp", admin.KeyFile, admin.LogKeyFile}
	for _, name := range names {
		t.Run("symlink at "+name, func(t *testing.T) {
			dest, victim := t.TempDir(), filepath.Join(t.TempDir(), "victim")
			writeFile(t, victim, []byte("root's file"), 0o644)
			if err := os.Symlink(victim, filepath.Join(dest, name)); err != nil {
				t.Fatal(err)
			}
			if _, err := ops.Backup(context.Background(), dest, admin.BackupOptions{}, nil); err != nil {
				t.Fatal(err)
			}
			if got := mustRead(t, victim); got != "root's file" {
				t.Fatalf("the symlink's target was overwritten: %d bytes", len(got))
			}
			wantKeysCopied(t, ops, dest)
		})
		t.Run("0666 file at "+name, func(t *testing.T) {
			dest := t.TempDir()
			writeFile(t, filepath.Join(dest, name), []byte("planted"), 0o666)
			if _, err := ops.Backup(context.Background(), dest, admin.BackupOptions{}, nil); err != nil {
				t.Fatal(err)
			}
			wantKeysCopied(t, ops, dest)
		})
	}
}

// TestBackupRefusesADestinationOthersCanWrite: in a directory another user
// can write to, that user could plant or swap the backup's files, unless
// the directory is sticky and owned by the server's user.
func TestBackupRefusesADestinationOthersCanWrite(t *testing.T) {
	ops := keyedOps(t)
	me, nobody := os.Geteuid(), 65534
	cases := []struct {
		mode  os.FileMode
		owner int
		ok    bool
	}{
		{0o700, me, true},
		{0o750, me, true},
		{0o770, me, false},
		{0o777, me, false},
		{0o757, me, false},
		{0o777 | os.ModeSticky, me, true},
		{0o777 | os.ModeSticky, nobody, false},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s owned by %d", tc.mode, tc.owner), func(t *testing.T) {
			dest := filepath.Join(t.TempDir(), "backup")
			if err := os.Mkdir(dest, 0o700); err != nil {
				t.Fatal(err)
			}
			if tc.owner != me {
				if me != 0 {
					t.Skip("giving a directory to another user takes root")
				}
				if err := os.Chown(dest, tc.owner, -1); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Chmod(dest, tc.mode); err != nil {
				t.Fatal(err)
			}
			_, err := ops.Backup(context.Background(), dest, admin.BackupOptions{}, nil)
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok {
				if err == nil || !strings.Contains(err.Error(), "is writable by group or others") || !strings.Contains(err.Error(), "chmod go-w") {
					t.Fatalf("got %v, want a refusal that says why and what to do", err)
				}
				if entries, _ := os.ReadDir(dest); len(entries) > 0 {
					t.Fatalf("a refused backup wrote %d files", len(entries))
				}
			}
		})
	}
}

// TestRestoreRefusesACraftedBackup: a backup whose key files or store are
// not regular files, or whose keys are not keys, is refused before anything
// is written: the destination is not even created.
func TestRestoreRefusesACraftedBackup(t *testing.T) {
	ops := keyedOps(t)
	good := t.TempDir()
	if _, err := ops.Backup(context.Background(), good, admin.BackupOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "hostname")
	writeFile(t, outside, []byte("0123456789abcdef0123456789abcdef"), 0o644) // 32 bytes, a key's size
	symlinkTo := func(target string) func(t *testing.T, path string) {
		return func(t *testing.T, path string) {
			os.Remove(path)
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		}
	}
	cases := []struct {
		name   string
		file   string
		tamper func(t *testing.T, path string)
		want   string
	}{
		{"server key symlinked", admin.KeyFile, symlinkTo(outside), "symbolic link"},
		{"log key symlinked", admin.LogKeyFile, symlinkTo(outside), "symbolic link"},
		{"store symlinked", admin.DBFile, symlinkTo(filepath.Join(good, admin.DBFile)), "not a regular file"},
		{"server key a FIFO", admin.KeyFile, func(t *testing.T, path string) {
			os.Remove(path)
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
		{"server key a directory", admin.KeyFile, func(t *testing.T, path string) {
			os.Remove(path)
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
		{"server key short", admin.KeyFile, func(t *testing.T, path string) { writeFile(t, path, []byte("short"), 0o600) }, "holds 5 bytes"},
		{"server key huge", admin.KeyFile, func(t *testing.T, path string) { writeFile(t, path, make([]byte, 1<<20), 0o600) }, "more than a key file"},
		{"log key garbage", admin.LogKeyFile, func(t *testing.T, path string) { writeFile(t, path, []byte("root:x:0:0\n"), 0o600) }, "not a transparency log key"},
		{"log key of two signers", admin.LogKeyFile, func(t *testing.T, path string) {
			s1, _, _ := note.GenerateKey(rand.Reader, "sealbox/test")
			_, v2, _ := note.GenerateKey(rand.Reader, "sealbox/test")
			writeFile(t, path, []byte(s1+"\n"+v2+"\n"), 0o600)
		}, "not the signer's"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := t.TempDir()
			if err := os.CopyFS(src, os.DirFS(good)); err != nil {
				t.Fatal(err)
			}
			tc.tamper(t, filepath.Join(src, tc.file))
			dst := filepath.Join(t.TempDir(), "restored")
			_, err := admin.Restore(context.Background(), src, dst, admin.RestoreOptions{Files: kvtest.StoreFiles{}}, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a refusal saying %q", err, tc.want)
			}
			if _, err := os.Lstat(dst); !os.IsNotExist(err) {
				t.Fatalf("a refused restore left %s behind (%v)", dst, err)
			}
		})
	}
	t.Run("untampered", func(t *testing.T) {
		dst := filepath.Join(t.TempDir(), "restored")
		if _, err := admin.Restore(context.Background(), good, dst, admin.RestoreOptions{Files: kvtest.StoreFiles{}}, nil); err != nil {
			t.Fatal(err)
		}
		wantKeysCopied(t, ops, dst)
	})
}
