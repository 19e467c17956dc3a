package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

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
	mode   string // "", "tile", "drop-cosignature", "old-checkpoint"
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
