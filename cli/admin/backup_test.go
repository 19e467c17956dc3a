package admin_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"sealbox/cli/admin"
)

// holdBackupLock takes dest's backup lock, as a backup running into dest
// holds it, until the returned function is called.
func holdBackupLock(t *testing.T, dest string) (release func()) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dest, admin.BackupLockFile), os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return func() { f.Close() }
}

// TestBackupRefusedWhileAnotherRuns: a backup into a destination another
// backup is writing (one holding its lock, with its temporary snapshot or
// its partial generation there) is refused at once, saying so and naming
// the destination, and leaves every file there byte for byte as it was, in
// both layouts: one backup, and generations. Unrefused, it would remove the
// other run's temporary snapshot (then the other would rename this one's
// half-written snapshot over the store), or the other's partial generation.
// Once the lock is released the backup runs, and the lock file it leaves
// is no generation and no store to restore.
func TestBackupRefusedWhileAnotherRuns(t *testing.T) {
	ops := keyedOps(t)
	for _, keep := range []int{0, 2} {
		t.Run(fmt.Sprintf("keep %d", keep), func(t *testing.T) {
			dest := filepath.Join(t.TempDir(), "backup")
			opts := admin.BackupOptions{Keep: keep}
			first, err := ops.Backup(context.Background(), dest, opts, nil)
			if err != nil {
				t.Fatal(err)
			}
			// What the running backup is writing.
			writing := filepath.Join(dest, admin.DBFile+".tmp")
			if keep > 0 {
				writing = filepath.Join(dest, ".partial-2099-01-01T000000Z", admin.DBFile+".tmp")
				if err := os.Mkdir(filepath.Dir(writing), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			writeFile(t, writing, []byte("half a snapshot"), 0o640)
			before := filesUnder(t, dest)

			release := holdBackupLock(t, dest)
			_, err = ops.Backup(context.Background(), dest, opts, nil)
			want := "another backup into " + dest + " is running"
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("a backup while another runs into %s: %v, want it refused with %q", dest, err, want)
			}
			if after := filesUnder(t, dest); !maps.Equal(before, after) {
				t.Fatalf("a refused backup changed the destination:\nbefore %v\nafter  %v", before, after)
			}

			release()
			second, err := ops.Backup(context.Background(), dest, opts, nil)
			if err != nil {
				t.Fatalf("a backup once the other ended: %v", err)
			}
			if keep > 0 {
				if newest := admin.NewestGeneration(dest); newest != second.Dest || first.Dest == second.Dest {
					t.Fatalf("the newest generation is %q, want the second backup's %q", newest, second.Dest)
				}
			}
			restoreOK(t, dest)
		})
	}
}
