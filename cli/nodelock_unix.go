//go:build unix

package cli

import (
	"errors"
	"fmt"
	"os"

	"sealbox/cli/admin"
)

// errDataDirLocked reports a data directory whose lock another sealbox
// process holds: a serve, or a compact.
var errDataDirLocked = errors.New("another sealbox process holds the data directory's lock")

// lockDataDir holds an exclusive lock on the data directory dir until the
// returned function is called (or the process ends, however it ends). serve
// holds it while it runs: a second serve on the same directory would be the
// same node, and at start it would release the claims of the one running.
// compact holds it while it replaces the store file, so a serve starting
// meanwhile is refused instead of opening the file being replaced. The
// lock is on the directory itself, which exists before either writes
// anything in it.
func lockDataDir(dir string) (func(), error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	busy, err := admin.LockExclusive(f)
	if busy || err != nil {
		f.Close()
		if busy {
			return nil, fmt.Errorf("%w (%s)", errDataDirLocked, dir)
		}
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() { f.Close() }, nil
}
