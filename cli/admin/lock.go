package admin

import (
	"errors"
	"os"
	"syscall"
)

// LockExclusive takes flock(2)'s exclusive lock on f without waiting, and
// reports busy, with no error, when another holder has it: another process,
// or another open of the same file in this one. The lock lasts until f is
// closed, or until the process ends however it ends, so a holder that is
// killed leaves none behind. A caller that is refused keeps f to close.
func LockExclusive(f *os.File) (busy bool, err error) {
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	return false, err
}
