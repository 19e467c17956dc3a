package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func newHealthcheckCmd() *cobra.Command {
	var target, caFile string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Exit 0 when the server's /readyz answers 200 (for container and service probes without curl)",
		Long: `healthcheck asks the server's /readyz and exits 0 when it answers 200, 1
otherwise, saying why. Without --url it asks the server of this environment: the
address of --listen's variable SEALBOX_LISTEN (default 127.0.0.1:8080; a wildcard
address is asked on loopback), over HTTPS when SEALBOX_TLS_CERT or SEALBOX_TLS_DOMAIN
is set. That local probe checks the server answers, not its certificate, which
names a domain rather than the loopback address. --url https://… checks the
certificate against the system's CAs, or against --cacert's for a private CA.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			insecure := false
			if target == "" {
				target, insecure = localReadyURL(os.Getenv)
			}
			tlsConfig := &tls.Config{InsecureSkipVerify: insecure}
			if caFile != "" {
				roots, err := loadCAFile(caFile)
				if err != nil {
					return err
				}
				tlsConfig.RootCAs = roots
			}
			return healthcheck(cmd.Context(), cmd.OutOrStdout(), target, timeout, tlsConfig)
		},
	}
	cmd.Flags().StringVar(&target, "url", "", "the readiness URL to ask, or the server's base URL (its /readyz); default: this environment's server")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for the answer")
	cmd.Flags().StringVar(&caFile, "cacert", "", "PEM file of the CA certificates an https:// server's certificate must chain to (a private CA), instead of the system's")
	return cmd
}

// loadCAFile reads the PEM certificates of --cacert.
func loadCAFile(path string) (*x509.CertPool, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--cacert: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(raw) {
		return nil, fmt.Errorf("--cacert %s holds no PEM certificate", path)
	}
	return roots, nil
}

// localReadyURL is the /readyz URL of the server configured by env, and
// whether its certificate goes unchecked (a local HTTPS probe by address).
func localReadyURL(getenv func(string) string) (string, bool) {
	addr := getenv(envName("listen"))
	if addr == "" {
		addr = "127.0.0.1:8080"
	}
	host, port, err := net.SplitHostPort(addr)
	if err == nil {
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			host = "127.0.0.1"
		}
		addr = net.JoinHostPort(host, port)
	}
	if getenv(envName("tls-cert")) != "" || getenv(envName("tls-domain")) != "" {
		return "https://" + addr + "/readyz", true
	}
	return "http://" + addr + "/readyz", false
}

// healthcheck asks url and succeeds on 200. A base URL (no path) asks its
// /readyz. An HTTPS server asked over HTTP, or the reverse, is named for
// what it speaks instead of the bare protocol error.
func healthcheck(ctx context.Context, w io.Writer, rawURL string, timeout time.Duration, tlsConfig *tls.Config) error {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" || u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("--url %q: want an http:// or https:// URL (a base URL asks its /readyz)", rawURL)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/readyz"
	}
	target := u.String()
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{
		TLSClientConfig: tlsConfig,
		Proxy:           nil,
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil && strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		return fmt.Errorf("not healthy: %s speaks plain HTTP, not HTTPS: ask http://%s", u.Host, u.Host+u.RequestURI())
	}
	var unknownCA x509.UnknownAuthorityError
	if errors.As(err, &unknownCA) {
		return fmt.Errorf("not healthy: %s's certificate is not signed by a CA this machine trusts (%w): for a private CA, give its certificate with --cacert FILE", u.Host, err)
	}
	if err != nil {
		return fmt.Errorf("not healthy: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if u.Scheme == "http" && resp.StatusCode == http.StatusBadRequest && strings.Contains(string(body), "HTTP request to an HTTPS server") {
		return fmt.Errorf("not healthy: %s speaks HTTPS: ask https://%s", u.Host, u.Host+u.RequestURI())
	}
	var answer struct {
		Checks map[string]string `json:"checks"`
	}
	json.Unmarshal(body, &answer)
	checks, _ := json.Marshal(answer.Checks)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("not ready: %s answered %d %s", target, resp.StatusCode, checks)
	}
	fmt.Fprintf(w, "ready: %s answered 200 %s\n", target, checks)
	return nil
}
