package blobs

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing bytes off..off+n of f to
// disk and returns at once. It is only a hint: durability still comes from
// the fsync that follows, so an error changes nothing and is ignored.
func startWriteback(f *os.File, off, n int64) {
	unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
