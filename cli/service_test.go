package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestREADMESystemdUnits: the README's systemd units (its ```ini blocks,
// each opening with the comment naming its file) pass systemd-analyze
// verify with nothing to say: no unknown key, no bad value. The one change
// made to them is the binary's path, since verify checks that ExecStart
// exists.
func TestREADMESystemdUnits(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("systemd-analyze is needed to check the README's units (Debian: systemd)")
		}
		t.Skip("systemd-analyze is not installed")
	}
	blocks, err := readmeBlocks("../README.md", "ini")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "sealbox")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var units []string
	for _, b := range blocks {
		name, ok := strings.CutPrefix(b.lines[0], "# /etc/systemd/system/")
		if !ok {
			t.Fatalf("README.md:%d: an ini block that does not open with # /etc/systemd/system/<unit>", b.line)
		}
		text := strings.ReplaceAll(strings.Join(b.lines, "\n")+"\n", "/usr/local/bin/sealbox", bin)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		units = append(units, name)
	}
	for _, want := range []string{"sealbox.service", "sealbox-backup.service", "sealbox-backup.timer"} {
		if !strings.Contains(strings.Join(units, " "), want) {
			t.Fatalf("the README has no %s (units: %v)", want, units)
		}
	}
	unit := string(mustRead(t, filepath.Join(dir, "sealbox.service")))
	for _, hardening := range []string{"User=sealbox", "ProtectSystem=strict", "ReadWritePaths=/var/lib/sealbox", "NoNewPrivileges=yes", "Restart=on-failure", "--data /var/lib/sealbox"} {
		if !strings.Contains(unit, hardening) {
			t.Errorf("sealbox.service lacks %s", hardening)
		}
	}
	for _, name := range units {
		cmd := exec.Command(analyze, "verify", name)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", name, err, out)
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
