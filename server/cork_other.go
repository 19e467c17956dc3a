//go:build !linux

package server

import "net"

// tcpCork holds nothing back outside Linux (see cork_linux.go): a header
// and its body may leave in two sends there.
type tcpCork struct{}

func newTCPCork(net.Conn) *tcpCork { return nil }

func (c *tcpCork) set(bool) {}
