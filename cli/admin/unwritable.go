package admin

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// explainUnwritable adds to err, a failure to create the backup destination
// dest, who writes backups when it is a matter of permission: the process
// that holds the store, which is the running server (the backup command only
// asks it over the admin socket), so dest must be writable by the server's
// user, and under systemd's ProtectSystem=strict listed in ReadWritePaths
// (without it, the path is read-only to the service). Other errors are
// returned as they are.
func explainUnwritable(err error, dest string) error {
	switch {
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return fmt.Errorf("%w: backups are written by the process that holds the store (the running server, when one runs; here uid %d), so %s must be writable by that user", err, os.Geteuid(), dest)
	case errors.Is(err, syscall.EROFS):
		return fmt.Errorf("%w: backups are written by the process that holds the store (the running server, when one runs), and %s is read-only to it: under systemd, add the destination to the unit's ReadWritePaths", err, dest)
	}
	return err
}
