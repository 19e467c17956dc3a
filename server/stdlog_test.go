package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"math/big"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sealbox/kv"
	"sealbox/kv/bolt"
	"sealbox/kv/kvtest"
	"sealbox/server"
	"sealbox/server/servertest"
)

// lockedBuffer collects log lines written from the server's goroutines.
type lockedBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, strings.Split(strings.TrimRight(string(p), "\n"), "\n")...)
	return len(p), nil
}

func (b *lockedBuffer) find(substr string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.lines {
		if strings.Contains(l, substr) {
			return l
		}
	}
	return ""
}

// TestHTTPServerLogsAreJSON: what net/http logs on its own (here a TLS
// handshake cut short by the client) is a JSON line of the server's logger,
// not plain text on standard error.
func TestHTTPServerLogsAreJSON(t *testing.T) {
	var logs lockedBuffer
	cfg := servertest.NewTestConfig(kvtest.NewClock())
	cfg.Log = zerolog.New(&logs)
	dir := t.TempDir()
	store := kvtest.LocationIn(t, dir).MustOpen(t, kv.Options{Now: cfg.Now}, bolt.Options{})
	defer store.Close()
	srv := server.New(cfg, store, servertest.MustOpenBlobs(t, dir, nil))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.StartTLS(ln, &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}})
	defer srv.Close(context.Background())

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte{0x16, 0x03, 0x01}) // the start of a record, then nothing
	conn.Close()
	deadline := time.Now().Add(10 * time.Second)
	var line string
	for line == "" && time.Now().Before(deadline) {
		line = logs.find("TLS handshake error")
		time.Sleep(10 * time.Millisecond)
	}
	if line == "" {
		t.Fatalf("no log line of the TLS handshake error: %q", logs.lines)
	}
	var entry map[string]any
	if err := json.Unmarshal([]byte(line), &entry); err != nil {
		t.Fatalf("the handshake error is not a JSON line: %q", line)
	}
	if entry["level"] != "warn" || entry["source"] != "net/http" || !strings.HasPrefix(entry["message"].(string), "http: TLS handshake error from 127.0.0.1:") {
		t.Fatalf("the handshake error line: %v", entry)
	}
}

// selfSigned is a certificate for 127.0.0.1 with its key.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
