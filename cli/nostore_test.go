package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"sealbox/kv/fault"
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

// TestAdminStoreAndBlobsFlagHelp: an admin command describes --store and
// --blobs as where the instance keeps its records and blobs, which it
// names, not in serve's words for choosing where to keep them.
func TestAdminStoreAndBlobsFlagHelp(t *testing.T) {
	for _, args := range [][]string{{"users", "list"}, {"users", "add"}, {"backup"}, {"check"}, {"gc"}, {"compact"}} {
		out, _ := mustCLI(t, "", append(args, "--help")...)
		for flag, want := range map[string]string{
			"--store string": "the instance's PostgreSQL database, when it keeps its records there (as serve's --store): postgres://",
			"--blobs string": "the instance's S3-compatible bucket, when it keeps its blobs there (as serve's --blobs): s3://",
		} {
			var line string
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, flag) {
					line = l
				}
			}
			if !strings.Contains(line, want) || strings.Contains(line, "instead") {
				t.Errorf("%s --help: the %s line %q", args, flag, line)
			}
		}
	}
}

// TestAdminCommandOfAUserWhoCannotEnterTheDataDirectory: with no server
// running, an admin command run by a user who may not enter the data
// directory says so, and shows the sudo -u form that runs it as the
// directory's owner, instead of blaming the admin socket. Root enters any
// directory, so as root the binary runs as another user.
func TestAdminCommandOfAUserWhoCannotEnterTheDataDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	_, stop := runServe(t, dir)
	stop()
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(dir, 0o700)
		_, _, err := runCLI(t, "", "users", "list", "--data", dir)
		if err == nil || !strings.Contains(err.Error(), "the data directory "+dir+" is not readable by this user") ||
			!strings.Contains(err.Error(), "sudo -u ") || !strings.Contains(err.Error(), " sealbox users list --data "+dir) {
			t.Fatalf("users list on a directory this user cannot enter: %v", err)
		}
		return
	}
	bin := buildBinary(t)
	// The other user must reach the binary and the data directory's
	// parent; the data directory itself is another user's, 0700.
	for _, d := range []string{filepath.Dir(filepath.Dir(bin)), filepath.Dir(bin), filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(dir, 4343, 4343); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "users", "list", "--data", dir)
	cmd.Env = serveEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 4242, Gid: 4242}}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "the data directory "+dir+" is not readable by this user") ||
		!strings.Contains(string(out), "sudo -u #4343 sealbox users list --data "+dir) || strings.Contains(string(out), "not opening the store directly") {
		t.Fatalf("users list run by a user who cannot enter the data directory: %v\n%s", err, out)
	}
}

// TestCLIMessagesSayItInWords: an admin command's refusal says what is
// wrong in words, without the API's error code, whether the store was
// opened directly or the running server answered; a count of one is
// singular.
func TestCLIMessagesSayItInWords(t *testing.T) {
	dir := t.TempDir()
	_, stop := runServe(t, dir)
	stop()
	run := func(args ...string) string {
		var out bytes.Buffer
		cmd := NewRootCmd()
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetIn(strings.NewReader("a long enough password\n"))
		if code := execute(t.Context(), cmd, append(args, "--data", dir)); code != 1 {
			t.Fatalf("sealbox %s: exit %d, want 1\n%s", strings.Join(args, " "), code, &out)
		}
		return out.String()
	}
	for _, through := range []string{"directly", "through the server"} {
		if through == "through the server" {
			startServe(t, dir)
		}
		if out := run("users", "disable", "nobody@example.org"); !strings.Contains(out, "\nsealbox: no account is registered under nobody@example.org\n") || strings.Contains(out, "error.") {
			t.Errorf("users disable of an unknown account, %s: %q", through, out)
		}
		if out := run("users", "add", "not-an-email", "--password-stdin"); !strings.Contains(out, "\nsealbox: email must be an address of 3 to 254 characters with one @\n") || strings.Contains(out, "error.") {
			t.Errorf("users add of a malformed email, %s: %q", through, out)
		}
	}
	if got := inWords(fmt.Errorf("refusing: %w", &fault.Error{Code: "error.account.not_found"})); got != "refusing: account not found" {
		t.Errorf("a code without a message: %q", got)
	}
	if got := count(1, "problem") + ", " + count(0, "problem") + ", " + count(int64(2), "problem"); got != "1 problem, 0 problems, 2 problems" {
		t.Errorf("count: %q", got)
	}
}
