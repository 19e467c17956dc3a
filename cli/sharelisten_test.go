package cli

import (
	"crypto/x509"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"sealbox/server"
	"sealbox/server/password"
)

// TestShareListenerServesHTTPSWithTheMainCertificate: serve with
// --share-listen and certificate files serves HTTPS on both listeners with
// the one certificate; the share listener answers share links and
// /healthz, and 404 with a problem body to the API, readiness and the
// OpenAPI file, which the main listener serves.
func TestShareListenerServesHTTPSWithTheMainCertificate(t *testing.T) {
	work := t.TempDir()
	ca := newTestCA(t)
	certFile, keyFile := filepath.Join(work, "cert.pem"), filepath.Join(work, "key.pem")
	ca.issue(t, 7, certFile, keyFile)
	cfg := server.DefaultConfig()
	cfg.Argon2 = password.Params{Time: 1, MemoryKiB: 64, Threads: 1}
	shareAddr := freeAddr(t)
	api, stop := runServeOf(t, &Serve{Location: Location{Data: filepath.Join(work, "data")}, Listen: "127.0.0.1:0",
		ShareListen: shareAddr, Config: cfg, TLS: TLS{CertFile: certFile, KeyFile: keyFile}})
	t.Cleanup(stop)
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	client := tlsClient(roots, "")
	get := func(url string) (int, string, string) {
		t.Helper()
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if serial := resp.TLS.PeerCertificates[0].SerialNumber.Int64(); serial != 7 {
			t.Errorf("%s: certificate serial %d, want 7", url, serial)
		}
		return resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), string(body)
	}
	shares := "https://" + shareAddr
	if !strings.HasPrefix(api, "https://") {
		t.Fatalf("main listener %s is not HTTPS", api)
	}
	if status, _, _ := get(shares + "/healthz"); status != 200 {
		t.Errorf("share listener /healthz: %d", status)
	}
	if status, acao, body := get(shares + "/s/" + strings.Repeat("c", 32)); status != 404 || acao != "*" || !strings.Contains(body, "error.share.not_found") {
		t.Errorf("share listener, unknown link: %d %q %s", status, acao, body)
	}
	for _, path := range []string{"/readyz", "/v1/version", "/v1/openapi.yaml"} {
		if status, _, body := get(shares + path); status != 404 || !strings.Contains(body, `"error.not_found"`) {
			t.Errorf("share listener %s: %d %s", path, status, body)
		}
		if status, _, _ := get(api + path); status != 200 {
			t.Errorf("main listener %s: %d", path, status)
		}
	}
}
