//go:build linux

package server

import (
	"bytes"
	"io"
	"net"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
)

// corkProbe is a ResponseWriter that records whether its connection was
// corked at each Flush and ReadFrom.
type corkProbe struct {
	*httptest.ResponseRecorder
	corked func() bool
	seen   []bool
}

func (w *corkProbe) Flush() { w.seen = append(w.seen, w.corked()) }

func (w *corkProbe) ReadFrom(src io.Reader) (int64, error) {
	w.seen = append(w.seen, w.corked())
	return io.Copy(w.ResponseRecorder, src)
}

// TestCorkHoldsHeaderWithBody: on a plain TCP connection, the header that
// ReadFrom sends first and the body after it are written while the
// connection is corked, so they leave in one send, and the cork is off
// once the body is written, so nothing is held back after it. A
// connection that is not TCP, and HTTP/2, have no cork.
func TestCorkHoldsHeaderWithBody(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	corked := func() bool {
		var v int
		raw.Control(func(fd uintptr) { v, _ = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK) })
		return v != 0
	}

	s := &Server{cfg: Config{WriteStall: time.Minute}}
	r := httptest.NewRequest("GET", "/s/x/blob/y", nil)
	r = r.WithContext(withConnCork(r.Context(), conn))
	probe := &corkProbe{ResponseRecorder: httptest.NewRecorder(), corked: corked}
	w := s.withWriteStall(probe, r)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", "100000")
	body := bytes.Repeat([]byte("x"), 100000)
	if _, err := io.CopyN(w, bytes.NewReader(body), int64(len(body))); err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, true, true}; len(probe.seen) != len(want) || !probe.seen[0] || !probe.seen[1] || !probe.seen[2] {
		t.Errorf("corked at the flush and each chunk: %v, want %v", probe.seen, want)
	}
	if corked() {
		t.Error("the connection is still corked after the body")
	}

	if corkOf(r) == nil {
		t.Fatal("an HTTP/1 request on a TCP connection has no cork")
	}
	h2 := r.Clone(r.Context())
	h2.ProtoMajor = 2
	if corkOf(h2) != nil {
		t.Error("an HTTP/2 request has a cork")
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if piped := r.WithContext(withConnCork(httptest.NewRequest("GET", "/", nil).Context(), a)); corkOf(piped) != nil {
		t.Error("a connection that is not TCP has a cork")
	}
}
