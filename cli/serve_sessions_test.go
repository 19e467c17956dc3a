package cli

import (
	"strings"
	"testing"

	"sealbox/server"
)

// TestServeSessionAndCodeLimitFlags: --session-max-age, --totp-attempts and
// --totp-attempt-window have their defaults, read the environment, show in
// --help, and refuse values the server cannot run with.
func TestServeSessionAndCodeLimitFlags(t *testing.T) {
	t.Setenv("SEALBOX_SESSION_MAX_AGE", "2160h")
	t.Setenv("SEALBOX_TOTP_ATTEMPTS", "3")
	cmd := newServeCmd()
	f := cmd.Flags()
	for name, want := range map[string]string{"session-max-age": "8760h0m0s", "totp-attempts": "5", "totp-attempt-window": "5m0s"} {
		if got := f.Lookup(name).DefValue; got != want {
			t.Errorf("--%s default: got %q, want %q", name, got, want)
		}
		if usage := f.Lookup(name).Usage; !strings.Contains(usage, "SEALBOX_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_"))) {
			t.Errorf("--%s help does not name its variable: %q", name, usage)
		}
	}
	if _, err := bindEnv(cmd); err != nil {
		t.Fatal(err)
	}
	if got := f.Lookup("session-max-age").Value.String(); got != "2160h0m0s" {
		t.Errorf("session-max-age from the environment: got %s", got)
	}
	if got := f.Lookup("totp-attempts").Value.String(); got != "3" {
		t.Errorf("totp-attempts from the environment: got %s", got)
	}
	for _, tc := range []struct {
		name string
		edit func(*server.Config)
	}{
		{"session-max-age zero", func(c *server.Config) { c.SessionMaxAge = 0 }},
		{"session-max-age negative", func(c *server.Config) { c.SessionMaxAge = -1 }},
		{"totp-attempts zero", func(c *server.Config) { c.TOTPAttempts = 0 }},
		{"totp-attempt-window zero", func(c *server.Config) { c.TOTPAttemptWindow = 0 }},
	} {
		cfg := server.DefaultConfig()
		tc.edit(&cfg)
		if err := validateConfig(&cfg, cliFlag); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}
