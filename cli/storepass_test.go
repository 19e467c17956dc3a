package cli

import (
	"context"
	"strings"
	"testing"
)

// TestStorePasswordOnTheCommandLineWarns: a password in --store on the
// command line is warned about (by serve on its log, by admin commands on
// standard error), pointing at PGPASSWORD; one in SEALBOX_STORE, or none,
// is not. The database behind the URLs does not exist: the warning comes
// before connecting.
func TestStorePasswordOnTheCommandLineWarns(t *testing.T) {
	const withPassword = "postgres://sealbox:hunter2@127.0.0.1:1/sealbox?sslmode=disable&connect_timeout=1"
	const without = "postgres://sealbox@127.0.0.1:1/sealbox?sslmode=disable&connect_timeout=1"
	dir := t.TempDir()
	_, errOut, _ := runCLI(t, "", "users", "list", "--data", dir, "--store", withPassword)
	if !strings.Contains(errOut, "holds a password") || !strings.Contains(errOut, "PGPASSWORD") {
		t.Errorf("users list --store with a password: %q", errOut)
	}
	if strings.Contains(errOut, "hunter2") {
		t.Errorf("the warning repeats the password: %q", errOut)
	}
	if _, errOut, _ = runCLI(t, "", "users", "list", "--data", dir, "--store", without); strings.Contains(errOut, "holds a password") {
		t.Errorf("users list --store without a password: %q", errOut)
	}
	log, _ := runServeCmd(context.Background(), "--data", dir, "--listen", "127.0.0.1:0", "--store", withPassword)
	if !strings.Contains(log, "holds a password") {
		t.Errorf("serve --store with a password: %q", log)
	}
	t.Setenv("SEALBOX_STORE", withPassword)
	t.Setenv("SEALBOX_DATA", dir)
	if _, errOut, _ = runCLI(t, "", "users", "list"); strings.Contains(errOut, "holds a password") {
		t.Errorf("a password in SEALBOX_STORE (not in ps) was warned about: %q", errOut)
	}
}
