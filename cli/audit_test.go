package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"sealbox/server/witness/witnesstest"
)

// runAudit runs `sealbox audit` with args and its state in stateDir, and
// returns its exit code and output.
func runAudit(t *testing.T, stateDir string, args ...string) (int, string) {
	t.Helper()
	t.Setenv("XDG_STATE_HOME", stateDir)
	var out bytes.Buffer
	cmd := NewRootCmd()
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	code := execute(context.Background(), cmd, append([]string{"audit"}, args...))
	return code, out.String()
}

// tamperer is a proxy in front of a server that changes what it serves as
// its mode says.
type tamperer struct {
	mu     sync.Mutex
	mode   string // "", "tile", "drop-cosignature", "old-checkpoint", "old-checkpoint-once"
	old    []byte // the checkpoint "old-checkpoint" serves
	target string
}

func (p *tamperer) setMode(mode string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = mode
}

func (p *tamperer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	mode, old := p.mode, p.old
	p.mu.Unlock()
	resp, err := http.Get(p.target + r.URL.Path)
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	switch {
	case mode == "tile" && strings.Contains(r.URL.Path, "/tile/") && len(body) > 0:
		body[len(body)-1] ^= 1
	case mode == "drop-cosignature" && strings.HasSuffix(r.URL.Path, "/checkpoint"):
		// The last line is a cosignature (the witnesses' lines follow the
		// log's own).
		body = body[:bytes.LastIndexByte(body[:len(body)-1], '\n')+1]
	case mode == "old-checkpoint" && strings.HasSuffix(r.URL.Path, "/checkpoint"):
		body = old
	case mode == "old-checkpoint-once" && strings.HasSuffix(r.URL.Path, "/checkpoint"):
		body = old
		p.setMode("")
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(body)
}

// TestAudit: `sealbox audit` against a live server with two witnesses: the
// first run trusts what it sees, later runs prove the log grew from the
// checkpoint kept for the log (whatever URL it is read from), --account
// lists the account's records; and a tampering proxy that rewrites a tile,
// drops a cosignature or serves an older checkpoint than one seen is
// caught each time (exit 1, a sentence a person understands), while usage
// and network errors exit 2.
func TestAudit(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	logKey := newLogKey(t, dir)
	w1 := witnesstest.Start(t, "witness.example/audit-one", logKey)
	w2 := witnesstest.Start(t, "witness.example/audit-two", logKey)
	l := serveWitnessed(t, dir, logKey, 2, w1.Flag(), w2.Flag())
	l.publish("audited@example.org")
	l.waitCosigned("checkpoint", 1, []*witnesstest.Witness{w1, w2}, w1, w2)
	first := get(t, l.url+"/v1/transparency/checkpoint")
	flags := []string{"--log-key", logKey, "--witness", w1.VerifierKey, "--witness", w2.VerifierKey}

	code, out := runAudit(t, state, append(flags, "--server", l.url)...)
	if code != 0 || !strings.Contains(out, "first audit of sealbox/witnessed.example") {
		t.Fatalf("first audit: exit %d\n%s", code, out)
	}
	l.publish("audited@example.org")
	l.publish("audited@example.org")
	l.waitCosigned("checkpoint", 3, []*witnesstest.Witness{w1, w2}, w1, w2)

	proxy := &tamperer{target: l.url, old: first}
	front := httptest.NewServer(proxy)
	defer front.Close()
	viaProxy := append(flags, "--server", front.URL)
	for _, tc := range []struct{ mode, want string }{
		{"tile", "a tile the server sent does not match its signed checkpoint"},
		{"drop-cosignature", "is cosigned by 1 of the witnesses you trust, not the 2 you require"},
	} {
		proxy.setMode(tc.mode)
		if code, out := runAudit(t, state, viaProxy...); code != 1 || !strings.Contains(out, tc.want) {
			t.Fatalf("%s: exit %d, want 1 saying %q:\n%s", tc.mode, code, tc.want, out)
		}
	}
	proxy.setMode("")
	status, profile := apiClient{t, l.url}.do("GET", "/v1/auth/profile", l.token, "", nil)
	userID, _ := profile["user_id"].(string)
	if status != 200 || userID == "" {
		t.Fatalf("profile: %d %v", status, profile)
	}
	code, out = runAudit(t, state, append(viaProxy, "--account", userID)...)
	if code != 0 || !strings.Contains(out, "grew from 1 to 3 records") || strings.Count(out, "index ") != 3 ||
		!strings.Contains(out, "index 2  version 3  directory ") || !strings.Contains(out, "3 directory records of account "+userID) {
		t.Fatalf("audit with --account: exit %d\n%s", code, out)
	}
	proxy.setMode("old-checkpoint")
	if code, out := runAudit(t, state, viaProxy...); code != 1 || !strings.Contains(out, "the log went backwards") {
		t.Fatalf("an older checkpoint: exit %d\n%s", code, out)
	}

	for name, args := range map[string][]string{
		"no server":       {"--log-key", logKey},
		"bad witness key": {"--server", l.url, "--log-key", logKey, "--witness", "nope"},
		"quorum too high": {"--server", l.url, "--log-key", logKey, "--quorum", "1"},
		"unknown flag":    {"--server", l.url, "--log-key", logKey, "--frobnicate"},
		"unreachable":     {"--server", "http://127.0.0.1:1", "--log-key", logKey},
	} {
		if code, out := runAudit(t, t.TempDir(), args...); code != 2 {
			t.Errorf("%s: exit %d, want 2\n%s", name, code, out)
		}
	}
}

// TestProveExtends: a smaller tree, or another root at the same size, is an
// inconsistency (exit 1) whatever the tiles say; the same tree, or any tree
// after the empty one, is consistent without reading a tile.
func TestProveExtends(t *testing.T) {
	a, b := tlog.Tree{N: 3, Hash: tlog.Hash{1}}, tlog.Tree{N: 3, Hash: tlog.Hash{2}}
	var noTiles tlog.HashReader = tlog.HashReaderFunc(func([]int64) ([]tlog.Hash, error) {
		t.Fatal("a tile was read")
		return nil, nil
	})
	for _, tc := range []struct {
		name       string
		tree, last tlog.Tree
		want       string
	}{
		{"split view", b, a, "two different logs of 3 records"},
		{"backwards", tlog.Tree{N: 2}, a, "the log went backwards"},
		{"the same", a, a, ""},
		{"from empty", a, tlog.Tree{}, ""},
	} {
		err := proveExtends(tc.tree, tc.last, noTiles)
		var coded *exitError
		if tc.want == "" && err != nil || tc.want != "" && (!errors.As(err, &coded) || coded.code != 1 || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestAuditRightAfterAPublish: a record in the log but not yet in the
// signed checkpoint the server serves is listed as such, with when the
// server signs, instead of "0 records"; --wait waits for a checkpoint that
// holds it (and says how long it waited when none comes); and --account
// refuses an email, saying where the user id is found.
func TestAuditRightAfterAPublish(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	logKey := newLogKey(t, dir)
	l := serveWitnessed(t, dir, logKey, 0)
	empty := waitCheckpoint(t, l.url+"/v1/transparency/checkpoint", 0)
	l.publish("fresh@example.org")
	waitCheckpoint(t, l.url+"/v1/transparency/checkpoint", 1)
	_, profile := apiClient{t, l.url}.do("GET", "/v1/auth/profile", l.token, "", nil)
	userID, _ := profile["user_id"].(string)

	// The proxy serves the checkpoint signed before the publish, as the
	// server does until its next signing.
	proxy := &tamperer{target: l.url, old: empty, mode: "old-checkpoint"}
	front := httptest.NewServer(proxy)
	defer front.Close()
	flags := []string{"--server", front.URL, "--log-key", logKey, "--account", userID}
	code, out := runAudit(t, state, flags...)
	if code != 0 || !strings.Contains(out, "index 0  version 1  directory ") || !strings.Contains(out, "  (not yet in a signed checkpoint)\n") ||
		!strings.Contains(out, "0 directory records of account "+userID+" in 0 records of the log") ||
		!strings.Contains(out, "1 record more in the log, not yet in a signed checkpoint (1 of them this account's): the server signs every 5 s") {
		t.Fatalf("audit right after a publish: exit %d\n%s", code, out)
	}
	// --wait gives up at its deadline, on the test's clock: a poll moves
	// it 30 s on, so the third poll is past the minute.
	now, polls := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC), 0
	var waited bytes.Buffer
	a := &Audit{Server: front.URL, LogKey: logKey, Account: userID, Wait: time.Minute, StateDir: t.TempDir(), Out: &waited,
		Now: func() time.Time { return now },
		After: func(d time.Duration) <-chan time.Time {
			polls++
			now = now.Add(30 * time.Second)
			ch := make(chan time.Time, 1)
			ch <- now
			return ch
		}}
	if err := a.settle(false); err != nil {
		t.Fatal(err)
	}
	var coded *exitError
	if err := a.Run(t.Context()); !errors.As(err, &coded) || coded.code != 2 || polls != 3 ||
		!strings.Contains(err.Error(), "after waiting 1m0s, the signed checkpoint still holds 0 of the log's 1 records: the server signs every 5 s") {
		t.Fatalf("--wait for a checkpoint that does not come: %v after %d polls\n%s", err, polls, &waited)
	}
	proxy.setMode("old-checkpoint-once")
	code, out = runAudit(t, state, append(flags, "--wait")...)
	if code != 0 || !strings.Contains(out, "waiting up to 1m0s for a signed checkpoint") || !strings.Contains(out, "index 0  version 1  directory ") ||
		!strings.Contains(out, "1 directory record of account "+userID+" in 1 record of the log") || strings.Contains(out, "not yet") {
		t.Fatalf("--wait for the next checkpoint: exit %d\n%s", code, out)
	}

	code, out = runAudit(t, state, "--server", l.url, "--log-key", logKey, "--account", "fresh@example.org")
	if code != 2 || !strings.Contains(out, `--account takes the account's user id (a UUID such as 6f1c2a3b-…), not "fresh@example.org"`) ||
		!strings.Contains(out, "user_id in GET /v1/auth/profile") || !strings.Contains(out, "USER ID column of `sealbox users list`") {
		t.Fatalf("--account with an email: exit %d\n%s", code, out)
	}
}

// TestAuditKeepsItsStatePrivate: the audit's state directory, found open
// to others, is made 0700, and a link planted at the temporary name of the
// state file does not redirect the write: the file it names is left as it
// was, and the state file is a private regular file.
func TestAuditKeepsItsStatePrivate(t *testing.T) {
	dir, xdg := t.TempDir(), t.TempDir()
	logKey := newLogKey(t, dir)
	l := serveWitnessed(t, dir, logKey, 0)
	waitCheckpoint(t, l.url+"/v1/transparency/checkpoint", 0)
	a := &Audit{LogKey: logKey, StateDir: filepath.Join(xdg, "sealbox", "audit")}
	if err := os.MkdirAll(a.StateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(a.StateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(t.TempDir(), "victim")
	writeFile(t, victim, []byte("untouched"))
	if err := os.Symlink(victim, a.stateFile()+".tmp"); err != nil {
		t.Fatal(err)
	}
	if code, out := runAudit(t, xdg, "--server", l.url, "--log-key", logKey); code != 0 {
		t.Fatalf("audit: exit %d\n%s", code, out)
	}
	if got, _ := os.ReadFile(victim); string(got) != "untouched" {
		t.Fatalf("the file the planted link names now holds %q", got)
	}
	if fi, err := os.Lstat(a.StateDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("state directory: %v %v, want mode 0700", fi.Mode(), err)
	}
	if fi, err := os.Lstat(a.stateFile()); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v %v, want a regular file of mode 0600", fi.Mode(), err)
	}
	if _, err := os.Lstat(a.stateFile() + ".tmp"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the temporary name is left behind: %v", err)
	}
}
