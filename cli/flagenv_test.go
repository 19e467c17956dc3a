package cli

import (
	"strings"
	"testing"
)

// TestAFlagWinsOverTheEnvironment: with SEALBOX_STORE exported (another
// instance's database), an admin command given --data works on that data
// directory, and says the variable was not used; without --data on the
// command line the variable is read as before.
func TestAFlagWinsOverTheEnvironment(t *testing.T) {
	dir := t.TempDir()
	mustCLI(t, "a long enough password\n", "users", "add", "here@example.org", "--password-stdin", "--data", dir)
	t.Setenv("SEALBOX_STORE", "postgres://elsewhere@127.0.0.1:1/other?sslmode=disable")
	out, errOut := mustCLI(t, "", "users", "list", "--data", dir)
	if !strings.Contains(out, "here@example.org") {
		t.Fatalf("users list --data with SEALBOX_STORE exported: %q", out)
	}
	if !strings.Contains(errOut, "SEALBOX_STORE set but not used") {
		t.Fatalf("the command did not say SEALBOX_STORE went unused: %q", errOut)
	}
	t.Setenv("SEALBOX_DATA", dir)
	if _, _, err := runCLI(t, "", "users", "list"); err == nil || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("without --data, SEALBOX_STORE is the store: %v", err)
	}
}
