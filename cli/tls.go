package cli

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"
)

// TLS says how serve speaks HTTPS: from certificate files, or with
// certificates an ACME server issues. The zero value serves plain HTTP.
type TLS struct {
	CertFile, KeyFile string
	// Domains, when set, are served with certificates from the ACME server
	// at ACMEDirectory, cached in the data directory.
	Domains       []string
	ACMEDirectory string
	ACMEEmail     string
	// ACMECAFile trusts the CA certificates in this PEM file (besides the
	// system's) for the ACME server's own HTTPS: a private ACME server, or
	// a test one.
	ACMECAFile string
}

// Enabled reports whether serve speaks HTTPS.
func (t TLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" || len(t.Domains) > 0 }

// acmeCacheDir is where issued certificates and the ACME account key live,
// inside the data directory, so a backup carries them.
const acmeCacheDir = "acme"

// validate refuses settings that cannot work together.
func (t TLS) validate(name func(string) string) error {
	if (t.CertFile == "") != (t.KeyFile == "") {
		return fmt.Errorf("%s and %s go together", name("tls-cert"), name("tls-key"))
	}
	if t.CertFile != "" && len(t.Domains) > 0 {
		return fmt.Errorf("%s and %s exclude each other: certificate files, or certificates from ACME", name("tls-cert"), name("tls-domain"))
	}
	if len(t.Domains) == 0 && (t.ACMECAFile != "" || t.ACMEEmail != "") {
		return fmt.Errorf("%s and %s need %s", name("acme-ca"), name("acme-email"), name("tls-domain"))
	}
	return nil
}

// config returns the TLS configuration serve uses and, for certificate
// files, the function that loads them again (nil for ACME, which renews on
// its own). HTTP/2 stays on: NextProtos offers h2 first.
func (t TLS) config(dataDir string) (*tls.Config, func() error, error) {
	if len(t.Domains) > 0 {
		client := &acme.Client{DirectoryURL: t.ACMEDirectory}
		if t.ACMECAFile != "" {
			pool, err := certPool(t.ACMECAFile)
			if err != nil {
				return nil, nil, err
			}
			client.HTTPClient = &http.Client{
				Timeout:   time.Minute,
				Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, Proxy: http.ProxyFromEnvironment},
			}
		}
		m := &autocert.Manager{
			Prompt:     autocert.AcceptTOS,
			Cache:      autocert.DirCache(filepath.Join(dataDir, acmeCacheDir)),
			HostPolicy: autocert.HostWhitelist(t.Domains...),
			Email:      t.ACMEEmail,
			Client:     client,
		}
		// TLSConfig answers the TLS-ALPN-01 challenge on this listener, so
		// the domain must reach it on port 443; certificates are issued on
		// the first handshake for a domain and renewed before they expire.
		return m.TLSConfig(), nil, nil
	}
	r := &certReloader{certFile: t.CertFile, keyFile: t.KeyFile}
	if err := r.load(); err != nil {
		return nil, nil, err
	}
	cfg := &tls.Config{GetCertificate: r.getCertificate, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12}
	return cfg, r.load, nil
}

// certPool is the system's roots and the certificates in the PEM file.
func certPool(path string) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// certReloader serves a certificate from files and loads them again when
// told (SIGHUP), so a renewed certificate needs no restart. A load that
// fails keeps the certificate in use.
type certReloader struct {
	certFile, keyFile string
	cert              atomic.Pointer[tls.Certificate]
}

func (r *certReloader) load() error {
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("load TLS certificate %s and key %s: %w", r.certFile, r.keyFile, err)
	}
	r.cert.Store(&cert)
	return nil
}

func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.cert.Load(), nil
}
