package blobs

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// renameNoReplace moves src to dst unless dst exists (fs.ErrExist then), in
// one step: renameat2(2) with RENAME_NOREPLACE, so no moment ever has the
// file under both names. A filesystem without it (EINVAL) gets
// linkThenRemove.
func renameNoReplace(src, dst string) error {
	err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		return linkThenRemove(src, dst)
	}
	if err != nil {
		return &os.LinkError{Op: "renameat2", Old: src, New: dst, Err: err}
	}
	return nil
}
