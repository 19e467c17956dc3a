package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"io"
	"math/big"
	"net"
	"net/http"
	"testing"
	"time"

	"sealbox/server"
)

// startHTTP2 serves ts's store again over TLS with HTTP/2 offered, as
// serve does with a certificate, and returns its URL and a client that
// speaks HTTP/2 to it.
func startHTTP2(t *testing.T, ts *TestServer) (*TestServer, *http.Client) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(ts.Config, ts.Store, ts.Blobs)
	ln, err := server.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.StartTLS(ln, &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, NextProtos: []string{"h2", "http/1.1"}})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Close(ctx)
	})
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
		ForceAttemptHTTP2: true,
	}}
	return &TestServer{ts.Node(srv, ts.Store, ts.Blobs)}, client
}

// TestHTTP2StreamsAreBounded: over HTTP/2 a stalled login body is cut off
// after AnonBodyTimeout, as on HTTP/1 (the deadline is the stream's), and
// the connection's other streams go on.
func TestHTTP2StreamsAreBounded(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.AnonBodyTimeout = 300 * time.Millisecond })
	ts.Register(t, "a@example.org")
	h2, client := startHTTP2(t, ts)
	url := h2.URL()

	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write([]byte(`{"email":`)) // and then nothing
	req, _ := http.NewRequest("POST", url+"/v1/auth/login", pr)
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := client.Do(req)
	if err == nil {
		if resp.ProtoMajor != 2 {
			t.Fatalf("protocol %s, want HTTP/2", resp.Proto)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if waited := time.Since(start); waited > 3*time.Second {
		t.Fatalf("a stalled HTTP/2 login body held its stream for %v", waited)
	}
	h2.WantMetric(t, `sealbox_limit_refusals_total{limit="anon-body-timeout"} 1`)

	r, err := client.Get(url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusOK || r.ProtoMajor != 2 {
		t.Fatalf("after the stalled stream: %d over %s", r.StatusCode, r.Proto)
	}
}
