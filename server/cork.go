package server

import (
	"context"
	"net"
	"net/http"
)

// withConnCork is the http.Server's ConnContext: it keeps the cork of a
// plain TCP connection (newTCPCork) in the context of its requests.
func withConnCork(ctx context.Context, c net.Conn) context.Context {
	if cork := newTCPCork(c); cork != nil {
		return context.WithValue(ctx, ctxCork, cork)
	}
	return ctx
}

// corkOf is the cork of r's connection, or nil: for HTTP/2, whose streams
// share one connection and whose frames another goroutine writes, and for
// TLS, there is none.
func corkOf(r *http.Request) *tcpCork {
	if r.ProtoMajor != 1 {
		return nil
	}
	cork, _ := r.Context().Value(ctxCork).(*tcpCork)
	return cork
}
