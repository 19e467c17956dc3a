package cli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"sealbox/cli/admin"
)

// TestRestoreRefusesABackupThatIsAlsoGenerations: a folder of generations in
// which a stray store was made (serve --data on the folder) is refused,
// naming the newest generation, instead of restoring the stray; the
// generation itself restores.
func TestRestoreRefusesABackupThatIsAlsoGenerations(t *testing.T) {
	dir, _, _, _ := restoreFixture(t, 2)
	root := filepath.Join(t.TempDir(), "generations")
	mustCLI(t, "", "backup", root, "--keep", "3", "--data", dir)
	// The stray: an instance created in the folder itself.
	mustCLI(t, "a long enough password\n", "users", "add", "stray@example.org", "--password-stdin", "--data", root)
	newest := admin.NewestGeneration(root)
	_, _, err := runCLI(t, "", "restore", root, "--data", filepath.Join(t.TempDir(), "restored"))
	if err == nil || !strings.Contains(err.Error(), "both a backup") || !strings.Contains(err.Error(), newest) {
		t.Fatalf("restore of a folder that is both: %v", err)
	}
	out, _ := mustCLI(t, "", "restore", newest, "--data", filepath.Join(t.TempDir(), "restored"))
	if !strings.Contains(out, "2 blobs") {
		t.Fatalf("restore of the newest generation: %q", out)
	}
}

// TestRestoreAsRootGivesTheFilesToTheTargetOwner: restore run as root into a
// new directory under one a service user owns gives every restored file to
// that user, and says so.
func TestRestoreAsRootGivesTheFilesToTheTargetOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("restore changes owners only when run as root")
	}
	dir, _, _, _ := restoreFixture(t, 2)
	backup := filepath.Join(t.TempDir(), "backup")
	mustCLI(t, "", "backup", backup, "--data", dir)
	parent := t.TempDir()
	const uid, gid = 4242, 4343
	if err := os.Chown(parent, uid, gid); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(parent, "restored")
	_, errOut := mustCLI(t, "", "restore", backup, "--data", target)
	if !strings.Contains(errOut, "belong to 4242:4343") {
		t.Fatalf("restore did not say whose the files are: %q", errOut)
	}
	n := 0
	err := filepath.Walk(target, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		if st.Uid != uid || st.Gid != gid {
			t.Errorf("%s belongs to %d:%d, want %d:%d", path, st.Uid, st.Gid, uid, gid)
		}
		n++
		return nil
	})
	if err != nil || n < 4 {
		t.Fatalf("walked %d files: %v", n, err)
	}
}
