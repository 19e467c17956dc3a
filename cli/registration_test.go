package cli

import (
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"sealbox/server"
)

// TestOpenRegistrationWarnsUnlessLoopbackAlone: serve warns at start that
// registration is open unless it listens on loopback without a trusted
// proxy; behind a proxy (--trust-proxy) on loopback it warns too, since the
// proxy brings the internet in.
func TestOpenRegistrationWarnsUnlessLoopbackAlone(t *testing.T) {
	for _, tc := range []struct {
		name         string
		registration string
		trustProxy   bool
		warn         bool
	}{
		{"open, loopback alone", "open", false, false},
		{"open, loopback behind a proxy", "open", true, true},
		{"closed, loopback behind a proxy", "closed", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log syncBuffer
			startServe(t, t.TempDir(), func(c *server.Config) {
				c.Registration, c.TrustProxy = tc.registration, tc.trustProxy
				c.Log = zerolog.New(&log)
			})
			if got := strings.Contains(log.String(), "registration is open"); got != tc.warn {
				t.Fatalf("warned %v, want %v:\n%s", got, tc.warn, log.String())
			}
		})
	}
}
