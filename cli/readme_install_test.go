package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestREADMEInstall runs the README's install steps as a newcomer would: the
// Quick start's ```bash blocks in order, as written (nothing substituted),
// in a fresh bash (no profile, no variables but HOME and the PATH a fresh
// root shell has, with go's directory: no ~/.local/bin), in a copy of this
// checkout; then the Quick start's `$ sealbox serve` in the background,
// until `sealbox healthcheck` (its default address, the one the README
// names) passes, then SIGTERM. It runs in a network namespace of its own,
// so 127.0.0.1:8080 is free whatever else runs on this machine, and a mount
// namespace with a tmpfs on /usr/local/bin and /usr/local/sbin, so
// installing there leaves the machine as it was. Where sudo is missing (a
// CI container), a sudo that runs its command stands in: the test runs as
// root, for whom sudo is just that.
func TestREADMEInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds sealbox the way the README does")
	}
	for _, tool := range []string{"git", "unshare", "ip", "bash"} {
		if _, err := exec.LookPath(tool); err != nil || os.Geteuid() != 0 {
			if os.Getenv("CI") == "true" {
				t.Fatalf("the install test needs root and %s", tool)
			}
			t.Skipf("the install test needs root and %s", tool)
		}
	}
	section := readmeSection(t, "../README.md", "## Quick start")
	bash, console := blocksIn(section, "bash"), blocksIn(section, "console")
	if len(bash) == 0 || len(console) == 0 {
		t.Fatal("the Quick start has no ```bash install block or no ```console serve block")
	}
	var serve string
	for _, line := range console[len(console)-1] {
		if cmd, ok := strings.CutPrefix(line, "$ "); ok && strings.Contains(cmd, "sealbox serve") {
			cmd, _, _ = strings.Cut(cmd, " #") // the comment, which would swallow the & below
			serve = cmd
		}
	}
	if serve == "" {
		t.Fatal("the Quick start's last ```console block starts no `sealbox serve`")
	}

	checkout := copyCheckout(t)
	var script strings.Builder
	script.WriteString("set -euxo pipefail\n")
	for _, blk := range bash {
		script.WriteString(strings.Join(blk, "\n") + "\n")
	}
	script.WriteString(serve + " &\n")
	script.WriteString(`server=$!
for i in $(seq 100); do sealbox healthcheck >/dev/null 2>&1 && break; sleep 0.1; done
sealbox healthcheck
kill -TERM "$server"
wait "$server"
test -f sealbox-data/sealbox.db
`)
	if err := os.WriteFile(filepath.Join(checkout, ".readme-install.sh"), []byte(script.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	freshPath := filepath.Dir(goBin) + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	setup := `set -e
ip link set lo up
mount -t tmpfs tmpfs /usr/local/bin
mount -t tmpfs tmpfs /usr/local/sbin
if ! command -v sudo >/dev/null; then
	printf '#!/bin/sh\nexec "$@"\n' >/usr/local/sbin/sudo
	chmod 0755 /usr/local/sbin/sudo
fi
exec env -i HOME="$HOME" PATH="$FRESH_PATH" bash --noprofile --norc .readme-install.sh`
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	run := exec.CommandContext(ctx, "unshare", "--mount", "--net", "--fork", "--", "bash", "-c", setup)
	run.Dir = checkout
	// Killed at the deadline with its namespace, server included.
	run.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	run.Cancel = func() error { return syscall.Kill(-run.Process.Pid, syscall.SIGKILL) }
	run.WaitDelay = 5 * time.Second
	run.Env = []string{"HOME=" + os.Getenv("HOME"), "PATH=" + os.Getenv("PATH"), "FRESH_PATH=" + freshPath}
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("the README's install steps failed (%v):\n%s", err, tail(string(out), 40))
	}
}

// readmeSection returns the README's lines from the heading to the next
// heading of the same level.
func readmeSection(t *testing.T, path, heading string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	level := heading[:strings.IndexByte(heading, ' ')+1]
	for i, line := range lines {
		if line != heading {
			continue
		}
		for j := i + 1; j < len(lines); j++ {
			if strings.HasPrefix(lines[j], level) {
				return lines[i:j]
			}
		}
		return lines[i:]
	}
	t.Fatalf("the README has no %q", heading)
	return nil
}

// blocksIn returns the lines of each block fenced ```lang in lines.
func blocksIn(lines []string, lang string) [][]string {
	var blocks [][]string
	var cur []string
	in := false
	for _, line := range lines {
		switch trimmed := strings.TrimSpace(line); {
		case !in && trimmed == "```"+lang:
			in, cur = true, nil
		case in && trimmed == "```":
			in = false
			blocks = append(blocks, cur)
		case in:
			cur = append(cur, line)
		}
	}
	return blocks
}

// copyCheckout copies this checkout's files (tracked, and untracked ones
// not ignored: the working tree as it is) into a temporary directory.
func copyCheckout(t *testing.T) string {
	t.Helper()
	list, err := exec.Command("git", "-C", "..", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "sealbox")
	for _, rel := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		if strings.Contains(rel, "node_modules/") {
			continue
		}
		info, err := os.Lstat(filepath.Join("..", rel))
		if err != nil || !info.Mode().IsRegular() {
			continue // deleted in the working tree, or not a plain file
		}
		raw, err := os.ReadFile(filepath.Join("..", rel))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dst, filepath.Dir(rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, rel), raw, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}
