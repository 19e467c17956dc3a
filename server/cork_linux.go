package server

import (
	"net"
	"syscall"
)

// tcpCork is the TCP connection under a request, when it is a plain TCP
// socket (not TLS), whose small segments a response can hold back while it
// writes its header and the start of its body, so both leave in one send as
// nginx's tcp_nopush does: a header sent alone costs the whole network path
// again (on loopback, about as much as sending 64 KiB with sendfile) and
// wakes the client twice.
type tcpCork struct{ raw syscall.RawConn }

// newTCPCork returns the cork of c, or nil when c is not a TCP socket.
func newTCPCork(c net.Conn) *tcpCork {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return &tcpCork{raw: raw}
}

// set holds partial segments back (on) or sends what is held at once (off).
// It may be called on a nil cork, and does nothing then. An error (the
// connection is gone) is the next write's to report.
func (c *tcpCork) set(on bool) {
	if c == nil {
		return
	}
	v := 0
	if on {
		v = 1
	}
	_ = c.raw.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, v)
	})
}
