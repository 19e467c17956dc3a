package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"
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

// config returns the TLS configuration serve uses, and a function that
// runs until ctx ends, reloading certificate files on SIGHUP. HTTP/2 stays
// on: NextProtos offers h2 first.
func (t TLS) config(ctx context.Context, dataDir string, log zerolog.Logger) (*tls.Config, func(), error) {
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
		return m.TLSConfig(), func() {}, nil
	}
	r := &certReloader{certFile: t.CertFile, keyFile: t.KeyFile, log: log}
	if err := r.load(); err != nil {
		return nil, nil, err
	}
	cfg := &tls.Config{GetCertificate: r.getCertificate, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12}
	return cfg, func() { r.reloadOnHangup(ctx) }, nil
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

// certReloader serves a certificate from files and loads them again on
// SIGHUP, so a renewed certificate needs no restart. A reload that fails
// keeps the certificate in use and says why.
type certReloader struct {
	certFile, keyFile string
	log               zerolog.Logger
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

// reloadOnHangup reloads the files on every SIGHUP until ctx ends.
func (r *certReloader) reloadOnHangup(ctx context.Context) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if err := r.load(); err != nil {
				r.log.Error().Err(err).Msg("SIGHUP: the certificate was not reloaded; the old one stays in use")
				continue
			}
			leaf := r.cert.Load().Leaf
			r.log.Info().Str("subject", leaf.Subject.String()).Time("not_after", leaf.NotAfter).Msg("SIGHUP: TLS certificate reloaded")
		}
	}
}
