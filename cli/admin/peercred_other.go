//go:build !linux && !darwin && !freebsd

package admin

import (
	"errors"
	"net"
)

// peerUID cannot tell who the peer is on this system, so the admin socket
// refuses every connection rather than trust the socket's mode alone.
func peerUID(*net.UnixConn) (uint32, error) {
	return 0, errors.New("this system does not report a unix socket peer's uid")
}
