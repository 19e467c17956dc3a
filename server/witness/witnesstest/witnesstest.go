// Package witnesstest gives tests a real witness: litewitness from
// filippo.io/torchwood (pinned in testdata/tools), started on 127.0.0.1
// with its key held by an ssh-agent of its own (Debian's openssh-client),
// over a state database prepared the way witnessctl prepares one (witnessctl
// itself needs a module the proxy does not serve): the tables litewitness
// creates, the log at size 0 with the empty tree's hash, and the log's
// verifier keys.
//
// litewitness is built once per pinned version into the user's cache
// directory (testtools.Build).
// Without the build, ssh-agent or sqlite3 a test skips, and fails under
// CI=true, where every component must be there.
package witnesstest

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/torchwood"
	"golang.org/x/crypto/ssh"
	"golang.org/x/mod/sumdb/note"

	"sealbox/testdata/testtools"
)

// Witness is a running litewitness.
type Witness struct {
	// Name is the witness's name, the first part of its verifier key.
	Name string
	// VerifierKey is its C2SP cosignature verifier key.
	VerifierKey string
	// URL is its base URL (add-checkpoint is below it).
	URL  string
	addr string
	dir  string
	fp   string // the key's SSH fingerprint
	bin  string
	proc *exec.Cmd
}

// Flag is the witness as `serve --witness` takes it: VKEY=URL.
func (w *Witness) Flag() string { return w.VerifierKey + "=" + w.URL }

// Start starts a witness named name that knows the log whose note verifier
// key is logKey (none when it is empty: see AddLog). It stops when the test
// ends.
func Start(tb testing.TB, name, logKey string) *Witness {
	tb.Helper()
	bin := need(tb)
	// Unix socket paths are short (108 bytes): not below t.TempDir().
	dir, err := os.MkdirTemp("", "lw")
	if err != nil {
		tb.Fatal(err)
	}
	w := &Witness{Name: name, dir: dir, bin: bin}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, err := torchwood.NewCosignatureSigner(name, priv)
	if err != nil {
		tb.Fatal(err)
	}
	w.VerifierKey = signer.Verifier().String()
	sshPub, _ := ssh.NewPublicKey(priv.Public())
	w.fp = ssh.FingerprintSHA256(sshPub)
	startAgent(tb, dir, priv)
	if err := sqlite(filepath.Join(dir, "witness.db"), schema); err != nil {
		tb.Fatal(err)
	}
	if logKey != "" {
		w.AddLog(tb, logKey)
	}
	if w.addr, err = testtools.FreeAddr(); err != nil {
		tb.Fatal(err)
	}
	w.URL = "http://" + w.addr
	w.Restart(tb)
	tb.Cleanup(w.Stop)
	return w
}

// Stop stops the witness; Restart starts it again on its database, key and
// address.
func (w *Witness) Stop() {
	if w.proc == nil {
		return
	}
	w.proc.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { w.proc.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		w.proc.Process.Kill()
		<-done
	}
	w.proc = nil
}

// Restart starts the stopped witness again and waits until it answers.
func (w *Witness) Restart(tb testing.TB) {
	tb.Helper()
	log, err := os.OpenFile(filepath.Join(w.dir, "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(w.bin, "-db", filepath.Join(w.dir, "witness.db"), "-name", w.Name, "-key", w.fp,
		"-ssh-agent", filepath.Join(w.dir, "agent.sock"), "-listen", w.addr)
	cmd.Stdout, cmd.Stderr = log, log
	testtools.DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	w.proc = cmd
	if err := waitFor(func() bool {
		c, err := net.Dial("tcp", w.addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}); err != nil {
		out, _ := os.ReadFile(filepath.Join(w.dir, "log"))
		tb.Fatalf("litewitness did not listen on %s: %s", w.addr, out)
	}
}

// Log is what the witness wrote so far.
func (w *Witness) Log() string {
	out, _ := os.ReadFile(filepath.Join(w.dir, "log"))
	return string(out)
}

// startAgent starts an ssh-agent on dir/agent.sock holding priv; it stops
// when the test ends.
func startAgent(tb testing.TB, dir string, priv ed25519.PrivateKey) {
	tb.Helper()
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		tb.Fatal(err)
	}
	keyFile := filepath.Join(dir, "witness.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		tb.Fatal(err)
	}
	sock := filepath.Join(dir, "agent.sock")
	agent := exec.Command("ssh-agent", "-D", "-a", sock)
	testtools.DieWithParent(agent)
	if err := agent.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { agent.Process.Kill(); agent.Wait() })
	if err := waitFor(func() bool { _, err := os.Stat(sock); return err == nil }); err != nil {
		tb.Fatal("ssh-agent made no socket")
	}
	add := exec.Command("ssh-add", keyFile)
	add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
	if out, err := add.CombinedOutput(); err != nil {
		tb.Fatalf("ssh-add: %v\n%s", err, out)
	}
}

// schema is the tables litewitness creates at start, made here first so
// the log can be added before it starts.
const schema = `PRAGMA foreign_keys = ON;
CREATE TABLE IF NOT EXISTS log (origin TEXT PRIMARY KEY, tree_size INTEGER NOT NULL, tree_hash TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS key (origin TEXT NOT NULL, key TEXT NOT NULL, FOREIGN KEY(origin) REFERENCES log(origin));
`

// AddLog makes the witness know the log whose note verifier key is logKey,
// as `witnessctl add-log` and `witnessctl add-key` do: the log at size 0
// with the hash of the empty tree, and its key. litewitness may be running.
func (w *Witness) AddLog(tb testing.TB, logKey string) {
	tb.Helper()
	v, err := note.NewVerifier(logKey)
	if err != nil {
		tb.Fatal(err)
	}
	empty := sha256.Sum256(nil)
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	if err := sqlite(filepath.Join(w.dir, "witness.db"), schema+fmt.Sprintf(`
INSERT INTO log (origin, tree_size, tree_hash) VALUES (%s, 0, %s);
INSERT INTO key (origin, key) VALUES (%s, %s);
`, quote(v.Name()), quote(base64.StdEncoding.EncodeToString(empty[:])), quote(v.Name()), quote(logKey))); err != nil {
		tb.Fatal(err)
	}
}

// sqlite runs script on the database at path.
func sqlite(path, script string) error {
	cmd := exec.Command("sqlite3", path)
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("sqlite3 %s: %v\n%s", path, err, out)
	}
	return nil
}

var (
	once    sync.Once
	binary  string
	missing error
)

// need returns litewitness's binary, building it at first use, or skips
// the test (fails it under CI=true) when a component is missing.
func need(tb testing.TB) string {
	tb.Helper()
	once.Do(func() {
		for _, tool := range []string{"ssh-agent", "ssh-add", "sqlite3"} {
			if _, err := exec.LookPath(tool); err != nil {
				missing = fmt.Errorf("%s is not installed (Debian: openssh-client, sqlite3)", tool)
				return
			}
		}
		binary, missing = testtools.Build("litewitness", "filippo.io/torchwood", "filippo.io/torchwood/cmd/litewitness")
	})
	if missing != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("no witness for the test: %v", missing)
		}
		tb.Skipf("no witness for the test: %v", missing)
	}
	return binary
}

func waitFor(ok func() bool) error {
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out")
		}
	}
	return nil
}
