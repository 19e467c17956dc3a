package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sealbox/server/servertest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSoak runs the built binary with its production defaults beside a
// hostile mix (abandoned logins, deep CBOR bodies, a relay flood, readers
// that never read, bodies that stall) and checks that a normal client's
// sign-in p99 stays under five times its quiet value and its share read p99
// under twice, measured in the same run, and that the server's peak RSS stays under 512 MiB,
// and under 64 MiB over idle while 300 signed-in uploads stall.
// Loopback only; each client address is a loopback address of its own
// (127.0.0.0/8 all reaches the server), so the per-address limits treat the
// hostile client as one client and the normal one as another.
func TestSoak(t *testing.T) {
	// Its bounds compare latencies, which other test packages running
	// beside it (go test ./... runs two at once here) would distort: it runs
	// only when asked, alone, as .ci/run does.
	if os.Getenv("SEALBOX_TEST_SOAK") == "" {
		t.Skip("the soak test runs alone, with SEALBOX_TEST_SOAK=1 (as .ci/run does)")
	}
	if raceEnabled {
		t.Skip("the race detector slows the clients measured here; .ci/run runs it without -race")
	}
	bin := buildSealbox(t)
	srv := startSealbox(t, bin, filepath.Join(t.TempDir(), "data"))
	base := srv.URL

	normal := newSoakAccount(t, base, "normal@example.org")
	hostile := newSoakAccount(t, base, "hostile@example.org")
	share := normal.share(t, base)

	measure := func(phase string) (signIn, read time.Duration) {
		// Each phase starts with a sign-in that is not counted. The first
		// hash after the server sat idle gets fresh memory for argon2id's
		// 64 MiB (the Go runtime hands idle memory back to the kernel),
		// and faulting it in costs this VM about 220 ms: with GOGC=off,
		// where every hash gets fresh memory, a sign-in takes about 280 ms
		// against 60. The quiet phase follows the registrations' hashes,
		// with that memory resident; the hostile one follows seconds of
		// setup, without. Counted, that one sign-in compared a cold hash
		// with warm ones and decided the bound by chance: with no hostile
		// mix at all, the second phase's first sign-in took 300 to 390 ms.
		normal.timedSignIn(t, base, phase, 20)
		var signIns, reads []time.Duration
		for i := range 20 {
			signIns = append(signIns, normal.timedSignIn(t, base, phase, i))
			for range 5 {
				reads = append(reads, timedRead(t, base+share))
			}
		}
		return p99(signIns), p99(reads)
	}
	quietSignIn, quietRead := measure("quiet")

	// 300 signed-in uploads that stall after 1 MiB each hold at most the
	// uploads' share of memory (--upload-buffer-account), not a buffer each.
	pid := srv.cmd.Process.Pid
	peakBefore := procStatusOf(t, pid, "VmHWM")
	idle, reset := resetPeakOf(t, pid)
	stopUploads := hostile.stallUploads(t, base, 300)
	time.Sleep(time.Second) // the server reads what it takes of the bytes sent
	stalledPeak := procStatusOf(t, pid, "VmHWM") - idle
	stopUploads()

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	hostile.attack(ctx, t, &wg, base, normal.album)
	time.Sleep(2 * time.Second) // the hostile mix at full strength
	hostileSignIn, hostileRead := measure("hostile")
	stop()
	wg.Wait()
	peak := max(peakBefore, procStatusOf(t, pid, "VmHWM"))

	t.Logf("sign-in p99: quiet %v, hostile %v; share read p99: quiet %v, hostile %v; server peak RSS %d MiB, %d MiB over idle (%d MiB) under 300 stalled uploads",
		quietSignIn.Round(time.Millisecond), hostileSignIn.Round(time.Millisecond),
		quietRead.Round(100*time.Microsecond), hostileRead.Round(100*time.Microsecond), peak>>20, stalledPeak>>20, idle>>20)
	// A share read takes a millisecond or two on loopback, where scheduling
	// noise of a busy CI machine is of the same order: it gets 20 ms of
	// slack beside the factor.
	// A sign-in is an argon2id hash that wants a whole core, and on the
	// 2-core machine this runs on the hostile mix's clients (this process)
	// and the server's work on them take the other core and some of this
	// one: measured 3.1 to 4.3 times the quiet p99 (225 to 311 ms against
	// 63 to 82 ms), the same 225 to 311 ms as before small blobs went
	// inline. The factor used to be 2, which held only because the quiet
	// sign-ins then ran beside the blob files' flushes (a quiet p99 of
	// about 200 ms); with the quiet phase quiet, 5 is what the machine
	// gives, and a sign-in stuck behind abandoned or flooding work (which
	// waits a queue of hashes, not a share of a core) still fails it. With
	// each phase started warm (measure), 15 runs on an idle 2-core VM gave
	// 1.2 to 4.1 times (quiet p99 80 to 114 ms); counting the cold first
	// sign-in, 4.0 to 5.4 times, failing one run in four or five.
	if hostileSignIn > 5*quietSignIn {
		t.Errorf("sign-in p99 under the hostile mix %v, want under 5 x %v", hostileSignIn, quietSignIn)
	}
	if hostileRead > 2*quietRead+20*time.Millisecond {
		t.Errorf("share read p99 under the hostile mix %v, want under 2 x %v (+20ms)", hostileRead, quietRead)
	}
	if peak >= 512<<20 {
		t.Errorf("server peak RSS %d MiB, want under 512 MiB", peak>>20)
	}
	if reset && stalledPeak >= 64<<20 {
		t.Errorf("server peak RSS under 300 stalled uploads %d MiB over idle, want under 64 MiB", stalledPeak>>20)
	}
}

// resetPeakOf makes the process pid's VmHWM restart from its current RSS
// (clear_refs 5) and returns that RSS, and whether Linux allowed the reset:
// without it the peak is the process's, which says nothing of one phase.
func resetPeakOf(tb testing.TB, pid int) (int64, bool) {
	tb.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		tb.Logf("cannot reset the server's peak RSS (%v): the stalled uploads' peak is not checked", err)
		return procStatusOf(tb, pid, "VmRSS"), false
	}
	return procStatusOf(tb, pid, "VmRSS"), true
}

// p99 is the 99th percentile of ds, nearest rank (the largest of fewer
// than 100).
func p99(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)*99+99)/100-1]
}

// procStatusOf reads a "kB" field of /proc/<pid>/status.
func procStatusOf(tb testing.TB, pid int, field string) int64 {
	tb.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Skipf("no /proc: %v", err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb)
			return kb << 10
		}
	}
	tb.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// from is an HTTP client whose connections come from the loopback address
// ip; keepAlive false opens a connection per request.
func from(ip string, keepAlive bool) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: !keepAlive}}
}

type soakAccount struct {
	email, access, album string
}

// newSoakAccount registers an account and gives it an album.
func newSoakAccount(t testing.TB, base, email string) *soakAccount {
	t.Helper()
	r := servertest.Client{BaseURL: base}.Do(t, Req{Method: "POST", Path: "/v1/auth/register", Body: map[string]any{"email": email, "password": servertest.Password}})
	a := &soakAccount{email: email, access: servertest.TokensOf(t, r).Access, album: newUUIDString()}
	servertest.Client{BaseURL: base}.Do(t, Req{Method: "POST", Path: "/v1/albums", Token: a.access, Body: map[string]any{"album_id": a.album}}).WantStatus(t, http.StatusCreated)
	return a
}

var soakSeq = 0

func newUUIDString() string {
	soakSeq++
	return fmt.Sprintf("5a0c0000-0000-4000-8000-%012x", soakSeq)
}

// upload stores data in one of the account's upload sessions.
func (a *soakAccount) upload(t testing.TB, base string, data []byte) {
	t.Helper()
	r := servertest.Client{BaseURL: base}.Do(t, Req{Method: "POST", Path: "/v1/albums/" + a.album + "/uploads", Token: a.access}).WantStatus(t, http.StatusCreated)
	up := r.JSON(t)["upload_id"].(string)
	servertest.Client{BaseURL: base}.Do(t, Req{Method: "PUT", Path: "/v1/uploads/" + up + "/blobs/" + servertest.HashOf(data), Token: a.access, Body: data, ContentType: "application/octet-stream"}).WantStatus(t, http.StatusCreated)
}

// share registers a share link and returns the path of its metadata.
func (a *soakAccount) share(t testing.TB, base string) string {
	t.Helper()
	meta, content := []byte("soak metadata"), bytes.Repeat([]byte("soak "), 200)
	a.upload(t, base, meta)
	a.upload(t, base, content)
	id := strings.Repeat("5a", 16)
	servertest.Client{BaseURL: base}.Do(t, Req{Method: "POST", Path: "/v1/shares", Token: a.access, Body: map[string]any{
		"opaque_id": id, "metadata_hash": servertest.HashOf(meta), "serves": []string{servertest.HashOf(meta), servertest.HashOf(content)},
		"wrapped_secret": base64.StdEncoding.EncodeToString([]byte("wrapped")),
	}}).WantStatus(t, http.StatusCreated)
	return "/s/" + id
}

// timedSignIn signs in, each time from a loopback address of its own (a
// person signs in a few times a day, not 30 times a minute), and returns
// how long it took.
func (a *soakAccount) timedSignIn(t testing.TB, base, phase string, i int) time.Duration {
	t.Helper()
	third := map[string]int{"quiet": 1, "hostile": 2}[phase]
	client := from(fmt.Sprintf("127.0.%d.%d", third, i+1), false)
	body := fmt.Sprintf(`{"email":%q,"password":%q}`, a.email, servertest.Password)
	start := time.Now()
	resp, err := client.Post(base+"/v1/auth/login", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s sign-in %d: status %d", phase, i, resp.StatusCode)
	}
	return took
}

var readClient = from("127.0.0.1", true)

// timedRead reads url (a share's metadata) and returns how long it took.
func timedRead(t testing.TB, url string) time.Duration {
	t.Helper()
	start := time.Now()
	resp, err := readClient.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("share read: status %d", resp.StatusCode)
	}
	return time.Since(start)
}
