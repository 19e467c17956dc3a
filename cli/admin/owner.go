package admin

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// giveToOwner gives every file restore wrote under dst the owner of dst
// itself, or of its parent when restore created dst (existed false), and
// returns that owner as "uid:gid". Only root can, and only root needs to:
// restore run as root (sudo) would otherwise leave root's files in a
// directory the service's user owns, and the service could not open its
// own store. It changes nothing ("") for any other user, or when that
// owner is root.
func giveToOwner(dst string, existed bool) (string, error) {
	if os.Geteuid() != 0 {
		return "", nil
	}
	ref := dst
	if !existed {
		ref = filepath.Dir(dst)
	}
	info, err := os.Stat(ref)
	if err != nil {
		return "", err
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok || st.Uid == 0 {
		return "", nil
	}
	uid, gid := int(st.Uid), int(st.Gid)
	err = filepath.WalkDir(dst, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
	if err != nil {
		return "", fmt.Errorf("give the restored files to the owner of %s (%d:%d): %w", ref, uid, gid, err)
	}
	return fmt.Sprintf("%d:%d", uid, gid), nil
}
