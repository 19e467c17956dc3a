package cli

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "sealbox test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue writes a certificate for 127.0.0.1 with the serial given, and its
// key, as PEM files.
func (ca *testCA) issue(t *testing.T, serial int64, certFile, keyFile string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	writeFile(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	writeFile(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	// Through a rename, as a certificate tool replaces files.
	if err := os.WriteFile(path+".new", data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// process is a program a test started; it ends with the test.
type process struct {
	cmd    *exec.Cmd
	log    *syncBuffer
	exited chan error
}

// startProcess runs bin with args and, when ready is set, waits until the
// output shows it (a line containing ready).
func startProcess(t *testing.T, env []string, ready string, bin string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(bin, args...), log: &syncBuffer{}, exited: make(chan error, 1)}
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Kill()
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for ready != "" && !strings.Contains(p.log.String(), ready) {
		select {
		case err := <-p.exited:
			t.Fatalf("%s exited at start (%v):\n%s", filepath.Base(bin), err, p.log.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not print %q within a minute:\n%s", filepath.Base(bin), ready, p.log.String())
		}
	}
	return p
}

// tlsClient trusts roots only and opens a new connection per request, so a
// reloaded certificate shows at once; it negotiates HTTP/2 when offered.
func tlsClient(roots *x509.CertPool, serverName string) *http.Client {
	return &http.Client{Timeout: 90 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots, ServerName: serverName},
		ForceAttemptHTTP2: true,
		DisableKeepAlives: true,
	}}
}

// TestTLSFromFilesReloadedOnHangup: serve speaks HTTPS (HTTP/2 on) with the
// certificate files given, loads them again on SIGHUP without a restart,
// and keeps the certificate in use when the new files do not load.
func TestTLSFromFilesReloadedOnHangup(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin, dir, work := buildBinary(t), t.TempDir(), t.TempDir()
	ca := newTestCA(t)
	certFile, keyFile := filepath.Join(work, "cert.pem"), filepath.Join(work, "key.pem")
	ca.issue(t, 1001, certFile, keyFile)
	addr := freeAddr(t)
	p := startProcess(t, serveEnv(), "sealbox listening", bin, "serve", "--data", dir, "--listen", addr, "--tls-cert", certFile, "--tls-key", keyFile)
	if !strings.Contains(p.log.String(), `"url":"https://`+addr) {
		t.Fatalf("the start line does not give the https URL:\n%s", p.log.String())
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	client := tlsClient(roots, "")
	serial := func() int64 {
		t.Helper()
		resp, err := client.Get("https://" + addr + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Proto != "HTTP/2.0" {
			t.Fatalf("readyz over TLS: %d %s", resp.StatusCode, resp.Proto)
		}
		return resp.TLS.PeerCertificates[0].SerialNumber.Int64()
	}
	if got := serial(); got != 1001 {
		t.Fatalf("serial %d, want 1001", got)
	}

	ca.issue(t, 1002, certFile, keyFile)
	p.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "the renewed certificate after SIGHUP", func() bool { return serial() == 1002 })
	// Info lines leave serve in batches at most 100 ms apart: the line may
	// follow the certificate by that much.
	waitFor(t, "the reload's log line", func() bool { return strings.Contains(p.log.String(), "TLS certificate reloaded") })

	writeFile(t, certFile, []byte("not a certificate"))
	p.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "the failed reload's log line", func() bool { return strings.Contains(p.log.String(), "the old one stays in use") })
	if got := serial(); got != 1002 {
		t.Fatalf("after a failed reload the server serves serial %d, want 1002 still", got)
	}
}

// waitFor polls cond for up to 10 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s", what)
		}
	}
}

// TestTLSFlagsThatCannotWork: half a certificate, both sources, and ACME
// options without a domain are refused before anything starts.
func TestTLSFlagsThatCannotWork(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", "c.pem"}, "--tls-cert and --tls-key go together"},
		{[]string{"--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-domain", "example.org"}, "exclude each other"},
		{[]string{"--acme-ca", "ca.pem"}, "need --tls-domain"},
	} {
		dir := filepath.Join(t.TempDir(), "data")
		_, err := runServeCmd(context.Background(), append([]string{"--data", dir, "--listen", "127.0.0.1:0"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%v: %v, want %q", tc.args, err, tc.want)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("%v created the data directory", tc.args)
		}
	}
	dir := t.TempDir()
	if _, err := runServeCmd(context.Background(), "--data", dir, "--listen", "127.0.0.1:0", "--tls-cert", "missing.pem", "--tls-key", "missing.pem"); err == nil || !strings.Contains(err.Error(), "load TLS certificate") {
		t.Fatalf("missing certificate files: %v", err)
	}
}

// buildTools builds the pinned test tools of testdata/tools into a temp
// dir. Offline, the build fails: the test is skipped, and fails under
// CI=true, where the module proxy is reachable.
func buildTools(t *testing.T, pkgs ...string) string {
	t.Helper()
	out := t.TempDir()
	build := exec.Command("go", append([]string{"build", "-o", out + string(filepath.Separator)}, pkgs...)...)
	build.Dir = filepath.Join("..", "testdata", "tools")
	if msg, err := build.CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("building the test tools failed: %v\n%s", err, msg)
		}
		t.Skipf("building the test tools failed (offline?): %v\n%s", err, msg)
	}
	return out
}

// TestACMEWithPebble: with --tls-domain, serve gets its certificate from a
// real ACME server, Pebble, through the TLS-ALPN-01 challenge answered on
// its own listener (Pebble's validator resolves the domain through its DNS
// test server to 127.0.0.1 and connects to sealbox's port), caches it in
// the data directory, and serves it over HTTP/2.
func TestACMEWithPebble(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs Pebble and the binary")
	}
	tools := buildTools(t, "github.com/letsencrypt/pebble/v2/cmd/pebble", "github.com/letsencrypt/pebble/v2/cmd/pebble-challtestsrv")
	bin, dir, work := buildBinary(t), t.TempDir(), t.TempDir()
	const domain = "photos.sealbox.test"

	// Pebble's own HTTPS listener needs a certificate; sealbox trusts its
	// CA through --acme-ca.
	ca := newTestCA(t)
	ca.issue(t, 7, filepath.Join(work, "pebble-cert.pem"), filepath.Join(work, "pebble-key.pem"))
	caFile := filepath.Join(work, "pebble-ca.pem")
	writeFile(t, caFile, ca.pem)

	acmeAddr, mgmtAddr, dnsAddr, sealboxAddr := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	_, sealboxPort, _ := net.SplitHostPort(sealboxAddr)
	var tlsPort int
	fmt.Sscan(sealboxPort, &tlsPort)
	config, _ := json.Marshal(map[string]any{"pebble": map[string]any{
		"listenAddress":                  acmeAddr,
		"managementListenAddress":        mgmtAddr,
		"certificate":                    filepath.Join(work, "pebble-cert.pem"),
		"privateKey":                     filepath.Join(work, "pebble-key.pem"),
		"httpPort":                       tlsPort, // no HTTP-01 here: sealbox answers TLS-ALPN-01
		"tlsPort":                        tlsPort,
		"ocspResponderURL":               "",
		"externalAccountBindingRequired": false,
	}})
	writeFile(t, filepath.Join(work, "pebble.json"), config)

	startProcess(t, os.Environ(), "Answering A queries", filepath.Join(tools, "pebble-challtestsrv"),
		"-dnsserver", dnsAddr, "-defaultIPv6", "", "-http01", "", "-https01", "", "-tlsalpn01", "", "-doh", "", "-management", freeAddr(t))
	// Pebble waits a random time before validating and rejects some nonces
	// on purpose, to harden clients; both are off here to keep the run short
	// and its outcome certain.
	pebbleEnv := append(os.Environ(), "PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0")
	startProcess(t, pebbleEnv, "ACME directory available", filepath.Join(tools, "pebble"),
		"-config", filepath.Join(work, "pebble.json"), "-dnsserver", dnsAddr)

	p := startProcess(t, serveEnv(), "sealbox listening", bin, "serve", "--data", dir, "--listen", sealboxAddr,
		"--tls-domain", domain, "--acme-directory", "https://"+acmeAddr+"/dir", "--acme-ca", caFile, "--acme-email", "admin@sealbox.test")

	// Pebble's root changes with every start; its management API serves it.
	mgmtRoots := x509.NewCertPool()
	mgmtRoots.AddCert(ca.cert)
	resp, err := tlsClient(mgmtRoots, "").Get("https://" + mgmtAddr + "/roots/0")
	if err != nil {
		t.Fatal(err)
	}
	rootPEM, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	roots := x509.NewCertPool()
	if resp.StatusCode != 200 || !roots.AppendCertsFromPEM(rootPEM) {
		t.Fatalf("Pebble's root: %d %q", resp.StatusCode, rootPEM)
	}

	// The first handshake for the domain has the certificate issued.
	client := tlsClient(roots, domain)
	resp, err = client.Get("https://" + sealboxAddr + "/readyz")
	if err != nil {
		t.Fatalf("HTTPS with the ACME certificate: %v\n--- sealbox:\n%s", err, p.log.String())
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Proto != "HTTP/2.0" {
		t.Fatalf("readyz: %d %s", resp.StatusCode, resp.Proto)
	}
	if names := resp.TLS.PeerCertificates[0].DNSNames; len(names) != 1 || names[0] != domain {
		t.Fatalf("the certificate names %v, want %s", names, domain)
	}
	cached, err := os.ReadDir(filepath.Join(dir, acmeCacheDir))
	if err != nil || len(cached) < 2 {
		t.Fatalf("the ACME cache in the data directory holds %d files (%v), want the account key and the certificate", len(cached), err)
	}
	// Another name is not issued for: autocert's host policy refuses it.
	if _, err := tlsClient(roots, "other.sealbox.test").Get("https://" + sealboxAddr + "/readyz"); err == nil {
		t.Fatal("a handshake for a domain not in --tls-domain succeeded")
	}
}

// TestHangupWithoutTLSKeepsServing: SIGHUP's default action would end the
// process, and `systemctl reload` sends it to any configuration: without
// certificate files serve says there is nothing to reload and goes on.
func TestHangupWithoutTLSKeepsServing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin, addr := buildBinary(t), freeAddr(t)
	p := startProcess(t, serveEnv(), "sealbox listening", bin, "serve", "--data", t.TempDir(), "--listen", addr)
	p.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "the SIGHUP log line", func() bool { return strings.Contains(p.log.String(), "nothing to reload") })
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("after SIGHUP the server is gone: %v\n%s", err, p.log.String())
	}
	resp.Body.Close()
	select {
	case err := <-p.exited:
		t.Fatalf("serve exited after SIGHUP: %v", err)
	default:
	}
}
