package blobs

import "golang.org/x/sys/unix"

// FreeBytes is the space left to an unprivileged writer on the filesystem
// that holds the blobs (the data directory's, in the default layout), for
// the readiness probe: a full disk refuses every upload and every commit.
func (s *Dir) FreeBytes() (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(s.dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
