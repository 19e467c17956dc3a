package blobs

import (
	"os"

	"golang.org/x/sys/unix"
)

// haveSyncFS reports whether syncFS works here; elsewhere PutSmall puts its
// blobs one by one.
const haveSyncFS = true

// syncFS flushes every written byte and name of the filesystem holding dir
// to disk and waits for it (syncfs(2), which reports writeback errors since
// Linux 5.8). It is one flush however many files a group wrote; its cost is
// that it also flushes whatever else on that filesystem is dirty.
func syncFS(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return unix.Syncfs(int(d.Fd()))
}
