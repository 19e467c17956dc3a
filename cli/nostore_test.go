package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestAdminCommandsSayNoStoreOneWay: every admin command that writes,
// given a data directory that does not exist, refuses in the one sentence
// the read-only ones use (naming the directory and how to point at it),
// never with a bare "open …: no such file or directory".
func TestAdminCommandsSayNoStoreOneWay(t *testing.T) {
	for _, args := range [][]string{
		{"users", "add", "a@example.org", "--password-stdin"},
		{"users", "set-quota", "a@example.org", "1GiB"},
		{"users", "disable", "a@example.org"},
		{"users", "reset-2fa", "a@example.org"},
		{"gc"},
	} {
		dir := filepath.Join(t.TempDir(), "none")
		_, _, err := runCLI(t, "a long enough password\n", append(args, "--data", dir)...)
		name := strings.Join(args[:min(2, len(args))], " ")
		if err == nil || !strings.Contains(err.Error(), dir+" holds no sealbox store") || !strings.Contains(err.Error(), "--data or SEALBOX_DATA") {
			t.Errorf("%s on a missing data directory: %v", name, err)
		}
		if err != nil && strings.Contains(err.Error(), "no such file or directory") {
			t.Errorf("%s on a missing data directory gives the bare system error: %v", name, err)
		}
	}
}

// TestAdminDataFlagHelp: every command that reads --data shows its
// variable, and only serve says the directory is created on first start.
func TestAdminDataFlagHelp(t *testing.T) {
	for _, args := range [][]string{
		{"users", "list"}, {"users", "add"}, {"backup"}, {"restore"}, {"check"}, {"gc"}, {"serve"},
	} {
		out, _ := mustCLI(t, "", append(args, "--help")...)
		var line string
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "--data string") {
				line = l
			}
		}
		if !strings.Contains(line, "[$SEALBOX_DATA]") {
			t.Errorf("%s --help: the --data line does not name SEALBOX_DATA: %q", args, line)
		}
		if created := strings.Contains(line, "created on first start"); created != (args[0] == "serve") {
			t.Errorf("%s --help: the --data line %q", args, line)
		}
	}
}
