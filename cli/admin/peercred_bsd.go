//go:build darwin || freebsd

package admin

import (
	"net"

	"golang.org/x/sys/unix"
)

// peerUID is the uid the peer of c ran as when it connected, as the kernel
// recorded it (LOCAL_PEERCRED): a peer cannot claim another.
func peerUID(c *net.UnixConn) (uint32, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Xucred
	var credErr error
	err = raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	})
	if err == nil {
		err = credErr
	}
	if err != nil {
		return 0, err
	}
	return cred.Uid, nil
}
