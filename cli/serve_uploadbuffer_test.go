package cli

import (
	"strings"
	"testing"

	"sealbox/server"
)

// The upload buffer limits are flags with their variables, shown in --help,
// read from the environment, and refused when not positive.
func TestServeUploadBufferFlags(t *testing.T) {
	t.Setenv("SEALBOX_UPLOAD_BUFFER_ACCOUNT", "4MiB")
	cmd := newServeCmd()
	f := cmd.Flags()
	for name, want := range map[string]string{"upload-buffer-account": "16MiB", "upload-buffer-total": "48MiB"} {
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
	if got := f.Lookup("upload-buffer-account").Value.String(); got != "4MiB" {
		t.Errorf("upload-buffer-account from the environment: got %s", got)
	}
	for name, edit := range map[string]func(*server.Config){
		"upload-buffer-account zero": func(c *server.Config) { c.UploadBufferAccount = 0 },
		"upload-buffer-total zero":   func(c *server.Config) { c.UploadBufferTotal = 0 },
	} {
		cfg := server.DefaultConfig()
		edit(&cfg)
		if err := validateConfig(&cfg, cliFlag); err == nil || !strings.Contains(err.Error(), "--upload-buffer-account and --upload-buffer-total must be positive") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
