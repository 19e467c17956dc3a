package admin

import (
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestBackupSaysWhoWritesIt: a destination the process cannot create is
// refused saying that the server process writes backups (its user must be
// able to write there; under systemd, ReadWritePaths), not with a bare
// "mkdir …: permission denied". Root passes permission checks, so the
// errors are the ones mkdir gives another user.
func TestBackupSaysWhoWritesIt(t *testing.T) {
	dest := filepath.Join(t.TempDir(), "backup")
	for _, tc := range []struct {
		errno syscall.Errno
		want  []string
	}{
		{syscall.EACCES, []string{"permission denied", "written by the process that holds the store", "running server", "must be writable by that user"}},
		{syscall.EROFS, []string{"read-only file system", "running server", "ReadWritePaths"}},
		{syscall.ENOSPC, []string{"no space left on device"}},
	} {
		err := explainUnwritable(&fs.PathError{Op: "mkdir", Path: dest, Err: tc.errno}, dest)
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: the refusal %q does not say %q", tc.errno, err, w)
			}
		}
		if tc.errno == syscall.ENOSPC && strings.Contains(err.Error(), "server") {
			t.Errorf("a full disk is blamed on permissions: %q", err)
		}
	}
}
