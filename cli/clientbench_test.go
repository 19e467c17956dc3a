package cli

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sealbox/cli/media/mediatest"
	"sealbox/server/servertest"
)

// BenchmarkClientSync measures `sealbox client sync` of a photo folder to a
// server on this machine beside `restic backup` of the same folder into a
// local repository, in one run (issue 35's goal: at least as fast), then a
// rerun on the unchanged folder, and `export` beside `restic restore`.
// restic is Debian's; without it the restic cases skip. The folder's size
// is SEALBOX_BENCH_MIB (default 256): photos of 1 to 8 MiB (a JPEG header
// over incompressible bytes, as a camera's are) and, one file in sixty, a
// video of 50 to 200 MiB.
//
//	go test -run '^$' -bench BenchmarkClientSync -benchtime 1x ./cli
func BenchmarkClientSync(b *testing.B) {
	total := int64(256)
	if v := os.Getenv("SEALBOX_BENCH_MIB"); v != "" {
		fmt.Sscan(v, &total)
	}
	total <<= 20
	folder := filepath.Join(b.TempDir(), "Library")
	os.MkdirAll(folder, 0o755)
	var made int64
	for i := 0; made < total; i++ {
		size := int64(1+i%8) << 20
		name := fmt.Sprintf("IMG_%05d.jpg", i)
		if i%60 == 59 {
			size, name = int64(50+50*(i/60%4))<<20, fmt.Sprintf("VID_%05d.mp4", i)
		}
		body := make([]byte, size)
		rand.Read(body)
		head := mediatest.JPEG(64, 48, byte(i), mediatest.EXIF{DateTimeOriginal: "2023:07:14 18:03:12"})
		copy(body, head)
		if err := os.WriteFile(filepath.Join(folder, name), body, 0o644); err != nil {
			b.Fatal(err)
		}
		made += size
	}
	bin := buildBinary(b)
	ts := servertest.MustOpenServer(b)
	// run runs the client and reports its peak RSS, which issue 35 bounds
	// at 150 MiB whatever the file sizes: its VmHWM, read every 10 ms
	// while it runs (getrusage's figure would include this test's own:
	// Linux keeps a process's peak across the exec that starts it).
	run := func(b *testing.B, args ...string) {
		cmd := exec.Command(bin, args...)
		cmd.Env = serveEnv()
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
		var peakKiB int64
		for {
			if b, err := os.ReadFile(status); err == nil {
				for _, line := range strings.Split(string(b), "\n") {
					var kib int64
					if _, err := fmt.Sscanf(line, "VmHWM: %d kB", &kib); err == nil {
						peakKiB = max(peakKiB, kib)
					}
				}
			}
			select {
			case err := <-done:
				if err != nil {
					b.Fatalf("%v: %v\n%s", args, err, out.Bytes())
				}
				b.ReportMetric(float64(peakKiB)/1024, "peak-MiB")
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	profile := filepath.Join(b.TempDir(), "profile")
	signup := exec.Command(bin, "client", "signup", ts.URL(), "--email", "bench@example.org", "--password-stdin", "--profile", profile)
	signup.Stdin = strings.NewReader("correct horse battery\ncorrect horse battery\n")
	if out, err := signup.CombinedOutput(); err != nil {
		b.Fatalf("signup: %v\n%s", err, out)
	}
	restic, _ := exec.LookPath("restic")
	repo := filepath.Join(b.TempDir(), "restic")
	if restic != "" {
		cmd := exec.Command(restic, "init", "--repo", repo)
		cmd.Env = append(os.Environ(), "RESTIC_PASSWORD=bench")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("restic init: %v\n%s", err, out)
		}
	}
	b.Run("sync", func(b *testing.B) {
		for range b.N {
			run(b, "client", "sync", folder, "--profile", profile)
		}
		b.SetBytes(made)
	})
	b.Run("restic-backup", func(b *testing.B) {
		if restic == "" {
			b.Skip("no restic (apt-get install restic)")
		}
		for range b.N {
			runRestic(b, restic, "backup", "--repo", repo, folder)
		}
		b.SetBytes(made)
	})
	b.Run("sync-unchanged", func(b *testing.B) {
		for range b.N {
			run(b, "client", "sync", folder, "--profile", profile)
		}
	})
	b.Run("export", func(b *testing.B) {
		for range b.N {
			run(b, "client", "export", filepath.Join(b.TempDir(), "out"), "--profile", profile)
		}
		b.SetBytes(made)
	})
	b.Run("restic-restore", func(b *testing.B) {
		if restic == "" {
			b.Skip("no restic (apt-get install restic)")
		}
		for range b.N {
			runRestic(b, restic, "restore", "latest", "--repo", repo, "--target", filepath.Join(b.TempDir(), "out"))
		}
		b.SetBytes(made)
	})
}

func runRestic(b *testing.B, restic string, args ...string) {
	cmd := exec.Command(restic, args...)
	cmd.Env = append(os.Environ(), "RESTIC_PASSWORD=bench")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("restic %v: %v\n%s", args, err, out)
	}
}
