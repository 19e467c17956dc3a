package cli

import (
	"debug/elf"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReleaseBinaryRunsInAnEmptyRoot builds the amd64 release binary the way
// the README says (.ci/release), checks its checksum file and that it is
// static and names the commit it was built from, then runs it in an empty
// root holding only the binary and /data (chroot, no environment: what a
// FROM scratch container gives it): serve starts, answers /healthz, its own
// healthcheck passes from inside the root, and SIGTERM stops it cleanly.
// chroot needs root, so the test skips without it, except in CI.
func TestReleaseBinaryRunsInAnEmptyRoot(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the release binary")
	}
	_, gitErr := exec.LookPath("git")
	_, chrootErr := exec.LookPath("chroot")
	if os.Geteuid() != 0 || gitErr != nil || chrootErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("the release test needs root, git and chroot")
		}
		t.Skip("the release test needs root, git and chroot")
	}
	out := t.TempDir()
	build := exec.Command("../.ci/release", out, "amd64")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf(".ci/release: %v\n%s", err, b)
	}
	check := exec.Command("sha256sum", "-c", "SHA256SUMS")
	check.Dir = out
	if b, err := check.CombinedOutput(); err != nil || !strings.Contains(string(b), "sealbox-linux-amd64: OK") {
		t.Fatalf("sha256sum -c SHA256SUMS: %v\n%s", err, b)
	}
	bin := filepath.Join(out, "sealbox-linux-amd64")
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("the release binary is dynamically linked (it has an ELF interpreter)")
		}
	}
	f.Close()
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	version, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.Contains(string(version), "commit:       "+strings.TrimSpace(string(head))+"\n") {
		t.Fatalf("the release binary's version does not name HEAD %s: %v\n%s", head, err, version)
	}
	serveInEmptyRoot(t, bin)
}

// serveInEmptyRoot runs bin's serve chrooted into a directory holding only
// the binary and /data, with no environment, probes it from outside and
// from inside, and stops it.
func serveInEmptyRoot(t *testing.T, bin string) {
	root := t.TempDir()
	raw, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "sealbox"), raw, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	srv := exec.Command("chroot", root, "/sealbox", "serve", "--data", "/data", "--listen", addr)
	srv.Env = []string{}
	log := &syncBuffer{ready: make(chan string, 1)}
	srv.Stderr = log
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	t.Cleanup(func() {
		srv.Process.Kill()
		<-exited
	})
	select {
	case <-log.ready:
	case err := <-exited:
		t.Fatalf("serve in an empty root exited at start: %v\n%s", err, log.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("serve in an empty root did not start:\n%s", log.String())
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz of the server in an empty root: %d", resp.StatusCode)
	}
	probe := exec.Command("chroot", root, "/sealbox", "healthcheck", "--url", "http://"+addr+"/readyz")
	probe.Env = []string{}
	if b, err := probe.CombinedOutput(); err != nil {
		t.Fatalf("healthcheck inside the empty root: %v\n%s", err, b)
	}
	srv.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("serve in an empty root after SIGTERM: %v\n%s", err, tail(log.String(), 10))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve in an empty root did not stop on SIGTERM")
	}
	for _, name := range []string{dbFile, "server.key", "transparency.key"} {
		if _, err := os.Stat(filepath.Join(root, "data", name)); err != nil {
			t.Errorf("the server in an empty root did not write /data/%s: %v", name, err)
		}
	}
}
