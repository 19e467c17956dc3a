package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sealbox/server/servertest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// These tests run the real binary, as an operator does, so what they prove
// (durability across kill -9, a real tus client) holds outside the test
// harness too.

// buildSealbox builds the sealbox binary into a temp dir.
func buildSealbox(tb testing.TB) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "sealbox")
	out, err := exec.Command("go", "build", "-o", bin, "sealbox").CombinedOutput()
	if err != nil {
		tb.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// sealboxProcess is a running `sealbox serve`.
type sealboxProcess struct {
	cmd *exec.Cmd
	URL string
}

// startSealbox runs `sealbox serve` on dataDir and a free loopback port and
// waits until it listens. It is killed when the test ends.
func startSealbox(tb testing.TB, bin, dataDir string) *sealboxProcess {
	tb.Helper()
	logPath := filepath.Join(tb.TempDir(), "serve.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		tb.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "serve", "--data", dataDir, "--listen", "127.0.0.1:0")
	// The log goes to a file, not a pipe, so the server never blocks on a
	// reader that stopped reading.
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p := &sealboxProcess{cmd: cmd}
	tb.Cleanup(p.kill)
	deadline := time.Now().Add(20 * time.Second)
	for p.URL == "" {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			tb.Fatalf("sealbox did not start listening:\n%s", log)
		}
		time.Sleep(20 * time.Millisecond)
		log, _ := os.ReadFile(logPath)
		for line := range strings.SplitSeq(string(log), "\n") {
			var entry struct{ Message, URL string }
			if json.Unmarshal([]byte(line), &entry) == nil && entry.URL != "" {
				p.URL = entry.URL
			}
		}
	}
	return p
}

// kill ends the process with SIGKILL, as a crash or the OOM killer does: no
// deferred function, no graceful shutdown.
func (p *sealboxProcess) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	}
}

// prepareUpload registers an account on the server at base, provisions an
// album and opens an upload session; it returns the access token and the
// upload id.
func prepareUpload(tb testing.TB, base string) (access, uploadID string) {
	tb.Helper()
	r := servertest.Client{BaseURL: base}.Do(tb, Req{Method: "POST", Path: "/v1/auth/register", Body: map[string]any{"email": "video@example.org", "password": servertest.Password}})
	access = servertest.TokensOf(tb, r).Access
	album := "0b3c1f7e-5d2a-4c8e-9f10-2a3b4c5d6e7f"
	servertest.Client{BaseURL: base}.Do(tb, Req{Method: "POST", Path: "/v1/albums", Token: access, Body: map[string]any{"album_id": album}}).WantStatus(tb, http.StatusCreated)
	r = servertest.Client{BaseURL: base}.Do(tb, Req{Method: "POST", Path: "/v1/albums/" + album + "/uploads", Token: access}).WantStatus(tb, http.StatusCreated)
	return access, r.JSON(tb)["upload_id"].(string)
}

// wantStoredIn fails unless the data directory's blob store holds exactly
// data under its hash, and no partial file is left.
func wantStoredIn(tb testing.TB, dataDir string, data []byte) {
	tb.Helper()
	h := servertest.HashOf(data)
	got, err := os.ReadFile(filepath.Join(dataDir, "blobs", h[0:2], h[2:4], h))
	if err != nil {
		tb.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		tb.Fatalf("the stored blob (%d bytes) differs from the %d uploaded", len(got), len(data))
	}
	wantNoPartials(tb, dataDir)
}

func wantNoPartials(tb testing.TB, dataDir string) {
	tb.Helper()
	if partials, _ := os.ReadDir(filepath.Join(dataDir, "blobs", "tus")); len(partials) != 0 {
		tb.Fatalf("partial files left after completion: %v", partials)
	}
}

// wantLinkServesAt registers a share link serving data (held by access, with a
// small metadata blob put through the upload session) on the server at base,
// and fails unless the link reads data back byte-identical: the path a
// recipient's client takes.
func wantLinkServesAt(tb testing.TB, base, access, uploadID string, data []byte) {
	tb.Helper()
	metadata := []byte("sealed metadata of the video")
	servertest.Client{BaseURL: base}.Do(tb, Req{Method: "PUT", Path: "/v1/uploads/" + uploadID + "/blobs/" + servertest.HashOf(metadata), Token: access,
		Body: metadata, ContentType: "application/octet-stream"}).WantStatus(tb, http.StatusCreated)
	const link = "0123456789abcdef0123456789abcdef"
	servertest.Client{BaseURL: base}.Do(tb, Req{Method: "POST", Path: "/v1/shares", Token: access, Body: map[string]any{
		"opaque_id":     link,
		"metadata_hash": servertest.HashOf(metadata),
		"serves":        []string{servertest.HashOf(metadata), servertest.HashOf(data)},
	}}).WantStatus(tb, http.StatusCreated)
	r := servertest.Client{BaseURL: base}.Do(tb, Req{Method: "GET", Path: "/s/" + link + "/blob/" + servertest.HashOf(data)}).WantStatus(tb, http.StatusOK)
	if !bytes.Equal(r.Body, data) {
		tb.Fatalf("the share link read %d bytes, not the %d uploaded", len(r.Body), len(data))
	}
}

// TestTusSurvivesKill9 kills the server with SIGKILL in the middle of a
// PATCH: the bytes it acknowledged before are still there after a restart,
// and the upload resumes and completes byte-identical.
func TestTusSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildSealbox(t)
	dataDir := t.TempDir()
	p := startSealbox(t, bin, dataDir)
	access, up := prepareUpload(t, p.URL)
	data := randomData(16 << 20)
	r := servertest.Client{BaseURL: p.URL}.Do(t, Req{Method: "POST", Path: "/v1/uploads/" + up + "/tus", Token: access,
		Header: tusHeaders("Upload-Length", strconv.Itoa(len(data)), "Upload-Metadata", tusMetadata(servertest.HashOf(data)))}).WantStatus(t, http.StatusCreated)
	loc := r.Header.Get("Location")
	patch := func(base string, offset int, body []byte) *Response {
		return servertest.Client{BaseURL: base}.Do(t, Req{Method: "PATCH", Path: loc, Token: access, Body: body,
			ContentType: "application/offset+octet-stream", Header: tusHeaders("Upload-Offset", strconv.Itoa(offset))})
	}
	acked := len(data) / 2
	patch(p.URL, 0, data[:acked]).WantStatus(t, http.StatusNoContent)

	// A second PATCH is streaming when the process dies.
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("PATCH", p.URL+loc, pr)
	req.Header.Set("Authorization", "Bearer "+access)
	req.Header.Set("Content-Type", "application/offset+octet-stream")
	req.Header.Set("Tus-Resumable", "1.0.0")
	req.Header.Set("Upload-Offset", strconv.Itoa(acked))
	go func() {
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	sent := 2 << 20
	if _, err := pw.Write(data[acked : acked+sent]); err != nil {
		t.Fatal(err)
	}
	// Kill once bytes the server never acknowledged are in the partial file:
	// the restart must cut them off, not count them.
	partial := filepath.Join(dataDir, "blobs", "tus", filepath.Base(loc))
	deadline := time.Now().Add(10 * time.Second)
	for {
		if fi, err := os.Stat(partial); err == nil && fi.Size() > int64(acked) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the streaming PATCH never reached the partial file")
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.kill()
	pw.Close()

	p = startSealbox(t, bin, dataDir)
	r = servertest.Client{BaseURL: p.URL}.Do(t, Req{Method: "HEAD", Path: loc, Token: access, Header: tusHeaders()}).WantStatus(t, http.StatusOK)
	offset, _ := strconv.Atoi(r.Header.Get("Upload-Offset"))
	if offset < acked || offset > acked+sent {
		t.Fatalf("HEAD after kill -9: offset %d, want %d..%d", offset, acked, acked+sent)
	}
	t.Logf("acknowledged %d before the kill, %d after the restart", acked, offset)
	patch(p.URL, offset, data[offset:]).WantStatus(t, http.StatusNoContent)
	wantStoredIn(t, dataDir, data)
}

// cuttingProxy forwards TCP connections to target and drops the first one
// that has carried limit bytes toward the server, as a dropped uplink does;
// later connections pass untouched. It returns the proxy's base URL.
func cuttingProxy(tb testing.TB, target string, limit int64) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	var cut atomic.Bool
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer client.Close()
				server, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer server.Close()
				go func() {
					io.Copy(client, server)
					client.Close()
				}()
				if _, err := io.CopyN(server, client, limit); err != nil || !cut.CompareAndSwap(false, true) {
					io.Copy(server, client)
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// installTusJS installs tus-js-client into jsDir with npm ci unless it is
// there. Outside CI a failed install (most often a machine without the npm
// registry) skips the test, saying why, so the test command runs offline;
// in CI it fails the test.
func installTusJS(npm, jsDir string, ci bool) (skip string, err error) {
	if _, err := os.Stat(filepath.Join(jsDir, "node_modules", "tus-js-client")); err == nil {
		return "", nil
	}
	out, err := exec.Command(npm, "ci", "--prefix", jsDir, "--no-audit", "--no-fund").CombinedOutput()
	switch {
	case err == nil:
		return "", nil
	case ci:
		return "", fmt.Errorf("npm ci: %v\n%s", err, out)
	}
	return fmt.Sprintf("npm ci could not install tus-js-client (is the npm registry unreachable from here?); CI runs this test (.ci/run): %v\n%s", err, out), nil
}

// TestTusJSInstallOffline: an npm that cannot reach its registry skips the
// tus-js-client test outside CI, saying why, and fails it in CI.
func TestTusJSInstallOffline(t *testing.T) {
	npm := filepath.Join(t.TempDir(), "npm")
	script := "#!/bin/sh\necho 'npm error code ENOTFOUND' >&2\nexit 1\n"
	if err := os.WriteFile(npm, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	jsDir := t.TempDir()
	skip, err := installTusJS(npm, jsDir, false)
	if err != nil || !strings.Contains(skip, "npm ci could not install tus-js-client (is the npm registry unreachable from here?)") || !strings.Contains(skip, "ENOTFOUND") {
		t.Fatalf("outside CI: skip %q, error %v", skip, err)
	}
	skip, err = installTusJS(npm, jsDir, true)
	if skip != "" || err == nil || !strings.Contains(err.Error(), "npm ci: exit status 1") || !strings.Contains(err.Error(), "ENOTFOUND") {
		t.Fatalf("in CI: skip %q, error %v", skip, err)
	}
}

// TestTusJSClientInterop drives the real tus-js-client (server/testdata/tusjs,
// run with node) against the real binary: a 64 MiB upload whose connection
// drops halfway, then resumed by a new Upload from its upload URL, and read
// back byte-identical through a share link (issue 9).
func TestTusJSClientInterop(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary and node")
	}
	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode != nil || errNpm != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node and npm are needed to run tus-js-client (Debian: nodejs, npm)")
		}
		t.Skip("node and npm are needed to run tus-js-client; CI installs them (.ci/run)")
	}
	jsDir, err := filepath.Abs(filepath.Join("testdata", "tusjs"))
	if err != nil {
		t.Fatal(err)
	}
	if skip, err := installTusJS(npm, jsDir, os.Getenv("CI") == "true"); err != nil {
		t.Fatal(err)
	} else if skip != "" {
		t.Skip(skip)
	}
	bin := buildSealbox(t)
	dataDir := t.TempDir()
	p := startSealbox(t, bin, dataDir)
	access, up := prepareUpload(t, p.URL)
	data := randomData(64 << 20)
	file := filepath.Join(t.TempDir(), "video.bin")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	proxy := cuttingProxy(t, strings.TrimPrefix(p.URL, "http://"), int64(len(data)/2))
	cmd := exec.Command(node, filepath.Join(jsDir, "upload.js"), proxy+"/v1/uploads/"+up+"/tus", access, file, servertest.HashOf(data))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tus-js-client: %v\n%s", err, stderr.Bytes())
	}
	var got struct {
		URL         string
		ResumedFrom int64
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("upload.js printed %q: %v", out, err)
	}
	t.Logf("the connection dropped after %d bytes; resumed from offset %d of %d", len(data)/2, got.ResumedFrom, len(data))
	if got.ResumedFrom <= 0 || got.ResumedFrom >= int64(len(data)) {
		t.Fatalf("the second attempt resumed from %d: not a resume", got.ResumedFrom)
	}
	if !strings.HasPrefix(got.URL, proxy+"/v1/uploads/"+up+"/tus/") {
		t.Fatalf("upload URL %q", got.URL)
	}
	wantLinkServesAt(t, p.URL, access, up, data)
	wantNoPartials(t, dataDir)
	if r := (servertest.Client{BaseURL: p.URL}).Do(t, Req{Method: "HEAD", Path: strings.TrimPrefix(got.URL, proxy), Token: access, Header: tusHeaders()}); r.Status != http.StatusNotFound {
		t.Fatalf("the finished transfer still answers HEAD: %d", r.Status)
	}
}
