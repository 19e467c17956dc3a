package cli

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// TestHealthcheckExitCodes: 0 when the server's /readyz answers 200, 1 when
// it answers otherwise or nothing answers.
func TestHealthcheckExitCodes(t *testing.T) {
	url := startServe(t, t.TempDir())
	if code := Execute([]string{"healthcheck", "--url", url + "/readyz"}); code != 0 {
		t.Fatalf("healthcheck of a ready server: exit %d", code)
	}
	// A server that is up but not ready answers 503 with the failed checks.
	notReady := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"code":"error.not_ready","status":503,"checks":{"store":"ok","blobs":"unwritable","disk":"ok"}}`))
	}))
	defer notReady.Close()
	if code := Execute([]string{"healthcheck", "--url", notReady.URL + "/readyz"}); code != 1 {
		t.Fatalf("healthcheck of a server answering 503: exit %d", code)
	}
	if _, _, err := runCLI(t, "", "healthcheck", "--url", notReady.URL+"/readyz"); err == nil || err.Error() != "not ready: "+notReady.URL+"/readyz answered 503 {\"blobs\":\"unwritable\",\"disk\":\"ok\",\"store\":\"ok\"}" {
		t.Fatalf("the refusal does not say what failed: %v", err)
	}
	if code := Execute([]string{"healthcheck", "--url", "http://" + freeAddr(t) + "/readyz", "--timeout", "2s"}); code != 1 {
		t.Fatalf("healthcheck with nothing listening: exit %d", code)
	}
}

// TestHealthcheckFindsTheLocalServer: without --url, the address comes from
// the environment serve reads.
func TestHealthcheckFindsTheLocalServer(t *testing.T) {
	for _, tc := range []struct {
		env      map[string]string
		url      string
		insecure bool
	}{
		{nil, "http://127.0.0.1:8080/readyz", false},
		{map[string]string{"SEALBOX_LISTEN": "0.0.0.0:9000"}, "http://127.0.0.1:9000/readyz", false},
		{map[string]string{"SEALBOX_LISTEN": ":9000"}, "http://127.0.0.1:9000/readyz", false},
		{map[string]string{"SEALBOX_LISTEN": "[::]:443", "SEALBOX_TLS_DOMAIN": "photos.example.org"}, "https://127.0.0.1:443/readyz", true},
		{map[string]string{"SEALBOX_LISTEN": "192.168.1.5:8443", "SEALBOX_TLS_CERT": "/etc/sealbox/cert.pem"}, "https://192.168.1.5:8443/readyz", true},
	} {
		url, insecure := localReadyURL(func(k string) string { return tc.env[k] })
		if url != tc.url || insecure != tc.insecure {
			t.Errorf("%v: %s %v, want %s %v", tc.env, url, insecure, tc.url, tc.insecure)
		}
	}
	t.Setenv("SEALBOX_LISTEN", startServe(t, t.TempDir())[len("http://"):])
	if code := Execute([]string{"healthcheck"}); code != 0 {
		t.Fatalf("healthcheck of the server SEALBOX_LISTEN names: exit %d", code)
	}
}

// TestHealthcheckURLs: a base URL (no path) asks /readyz and prints the
// checks as JSON; an HTTPS server asked over HTTP, and an HTTP one asked
// over HTTPS, are named for the scheme they speak.
func TestHealthcheckURLs(t *testing.T) {
	url := startServe(t, t.TempDir())
	for _, base := range []string{url, url + "/"} {
		out, _, err := runCLI(t, "", "healthcheck", "--url", base)
		if err != nil || out != "ready: "+url+"/readyz answered 200 {\"blobs\":\"ok\",\"disk\":\"ok\",\"store\":\"ok\"}\n" {
			t.Fatalf("healthcheck --url %s: %q %v", base, out, err)
		}
	}
	tlsServer := httptest.NewTLSServer(http.NotFoundHandler())
	defer tlsServer.Close()
	host := strings.TrimPrefix(tlsServer.URL, "https://")
	if _, _, err := runCLI(t, "", "healthcheck", "--url", "http://"+host); err == nil || !strings.Contains(err.Error(), host+" speaks HTTPS: ask https://"+host+"/readyz") {
		t.Fatalf("healthcheck over HTTP of an HTTPS port: %v", err)
	}
	plainHost := strings.TrimPrefix(url, "http://")
	if _, _, err := runCLI(t, "", "healthcheck", "--url", "https://"+plainHost); err == nil || !strings.Contains(err.Error(), "speaks plain HTTP") {
		t.Fatalf("healthcheck over HTTPS of an HTTP port: %v", err)
	}
	if _, _, err := runCLI(t, "", "healthcheck", "--url", "localhost:8080"); err == nil || !strings.Contains(err.Error(), "want an http:// or https:// URL") {
		t.Fatalf("healthcheck of a URL without a scheme: %v", err)
	}
}

// TestHealthcheckPrivateCA: an https:// server whose certificate a private
// CA signed is refused, with a pointer to --cacert, until --cacert names
// that CA's certificate; a --cacert holding no certificate is refused.
func TestHealthcheckPrivateCA(t *testing.T) {
	tlsServer := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"status":"ready","checks":{"store":"ok"}}`))
	}))
	defer tlsServer.Close()
	host := strings.TrimPrefix(tlsServer.URL, "https://")
	if _, _, err := runCLI(t, "", "healthcheck", "--url", tlsServer.URL); err == nil ||
		!strings.Contains(err.Error(), "not healthy: "+host+"'s certificate is not signed by a CA this machine trusts") || !strings.Contains(err.Error(), "give its certificate with --cacert FILE") {
		t.Fatalf("healthcheck of a server of a private CA: %v", err)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	writeFile(t, ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsServer.Certificate().Raw}))
	out, _, err := runCLI(t, "", "healthcheck", "--url", tlsServer.URL, "--cacert", ca)
	if err != nil || out != "ready: "+tlsServer.URL+"/readyz answered 200 {\"store\":\"ok\"}\n" {
		t.Fatalf("healthcheck --cacert: %q %v", out, err)
	}
	notPEM := filepath.Join(t.TempDir(), "ca.txt")
	writeFile(t, notPEM, []byte("not a certificate"))
	if _, _, err := runCLI(t, "", "healthcheck", "--url", tlsServer.URL, "--cacert", notPEM); err == nil || err.Error() != "--cacert "+notPEM+" holds no PEM certificate" {
		t.Fatalf("healthcheck --cacert of a file without a certificate: %v", err)
	}
}
