//go:build !linux

package blobs

// renameNoReplace moves src to dst unless dst exists (fs.ErrExist then).
// Without renameat2(2) it is linkThenRemove.
func renameNoReplace(src, dst string) error { return linkThenRemove(src, dst) }
