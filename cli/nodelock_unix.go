//go:build unix

package cli

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockNodeID holds an exclusive lock on the node id file at path until the
// returned function is called (or the process ends, however it ends): a
// second serve on the same data directory would be the same node, and at
// start it would release the claims of the one running.
func lockNodeID(path string) (func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another sealbox serve runs on this data directory (it holds %s): one node per data directory", path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
