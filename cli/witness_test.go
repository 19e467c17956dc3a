package cli

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/torchwood"
	"github.com/fxamacker/cbor/v2"
	"github.com/rs/zerolog"
	"golang.org/x/mod/sumdb/note"

	"sealbox/cli/admin"
	"sealbox/server"
	"sealbox/server/hybridsig"
	"sealbox/server/witness"
	"sealbox/server/witness/witnesstest"
)

// witnessedLog is a served log under test: its data directory, the
// verifier key its checkpoints are signed with, and its server.
type witnessedLog struct {
	t      *testing.T
	dir    string
	logKey string
	url    string
	stop   func()
	// metrics is the server's metrics address; logs, what it logged.
	metrics string
	logs    *syncBuffer
	key     *hybridsig.DevKey
	token   string
	version uint64
}

// newLogKey makes the log key of a data directory before its first start,
// so witnesses can be told the key first, and returns its verifier key.
func newLogKey(t *testing.T, dir string) string {
	t.Helper()
	var made []newFile
	key, err := readLogKey(filepath.Join(dir, admin.LogKeyFile), "sealbox/witnessed.example", &made)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeNewFiles(made); err != nil {
		t.Fatal(err)
	}
	return key.VerifierKey
}

// serveWitnessed starts serve on dir with the witnesses and quorum given.
func serveWitnessed(t *testing.T, dir, logKey string, quorum int, witnesses ...string) *witnessedLog {
	t.Helper()
	l := &witnessedLog{t: t, dir: dir, logKey: logKey, logs: &syncBuffer{}, key: hybridsig.NewDevKey([32]byte{'w'})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.metrics = ln.Addr().String()
	ln.Close()
	l.url, l.stop = runServeWith(t, Location{Data: dir}, func(s *Serve) {
		s.MetricsListen = l.metrics
		for _, spec := range witnesses {
			w, err := witness.Parse(spec)
			if err != nil {
				t.Fatal(err)
			}
			s.Witnessing.Witnesses = append(s.Witnessing.Witnesses, w)
		}
	}, openRegistration, func(c *server.Config) {
		c.WitnessQuorum = quorum
		c.Log = zerolog.New(l.logs)
	})
	t.Cleanup(l.stop)
	return l
}

// publish publishes the next directory version of one account (made at the
// first call), appending one record to the log.
func (l *witnessedLog) publish(email string) {
	l.t.Helper()
	if l.token == "" {
		l.token, _ = apiClient{l.t, l.url}.account(email)
	}
	l.version++
	body, _ := cbor.Marshal(map[string]any{"directory_version": l.version})
	req, _ := http.NewRequest("POST", l.url+"/v1/auth/devices/directory", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+l.token)
	req.Header.Set("Content-Type", "application/cbor")
	req.Header.Set("X-Service-Identity-Key", l.key.PublicKeyBase64())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		l.t.Fatalf("publish %d: %d", l.version, resp.StatusCode)
	}
}

// checkpoint reads the checkpoint at path (below /v1/transparency/),
// verifies the log's signature with x/mod's note alone, and returns its
// size and the names of the witnesses whose cosignatures torchwood's C2SP
// cosignature verifiers accept.
func (l *witnessedLog) checkpoint(path string, witnesses ...*witnesstest.Witness) (int64, []string) {
	l.t.Helper()
	raw := get(l.t, l.url+"/v1/transparency/"+path)
	logVerifier, err := note.NewVerifier(l.logKey)
	if err != nil {
		l.t.Fatal(err)
	}
	if _, err := note.Open(raw, note.VerifierList(logVerifier)); err != nil {
		l.t.Fatalf("x/mod note.Open with the log's key: %v\n%s", err, raw)
	}
	verifiers := []note.Verifier{logVerifier}
	for _, w := range witnesses {
		v, err := torchwood.NewCosignatureVerifier(w.VerifierKey)
		if err != nil {
			l.t.Fatal(err)
		}
		verifiers = append(verifiers, v)
	}
	n, err := note.Open(raw, note.VerifierList(verifiers...))
	if err != nil {
		l.t.Fatalf("a cosignature does not verify: %v\n%s", err, raw)
	}
	cp, err := torchwood.ParseCheckpoint(n.Text)
	if err != nil || cp.Origin != logVerifier.Name() {
		l.t.Fatalf("checkpoint %q: %v", n.Text, err)
	}
	var names []string
	for _, sig := range n.Sigs {
		if sig.Name != logVerifier.Name() {
			names = append(names, sig.Name)
		}
	}
	slices.Sort(names)
	return cp.N, names
}

// waitCosigned waits until the checkpoint at path names size records and
// is cosigned by exactly the witnesses want.
func (l *witnessedLog) waitCosigned(path string, size int64, want []*witnesstest.Witness, all ...*witnesstest.Witness) {
	l.t.Helper()
	var names []string
	for _, w := range want {
		names = append(names, w.Name)
	}
	slices.Sort(names)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		n, got := l.checkpoint(path, all...)
		if n == size && slices.Equal(got, names) {
			return
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("%s: size %d cosigned by %v, want %d by %v\nserver log:\n%s", path, n, got, size, names, l.logs)
		}
	}
}

// metric returns the metrics lines that contain all of parts.
func (l *witnessedLog) metric(parts ...string) []string {
	l.t.Helper()
	var lines []string
	for line := range strings.Lines(string(get(l.t, "http://"+l.metrics+"/metrics"))) {
		if !strings.HasPrefix(line, "#") && !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
			lines = append(lines, strings.TrimSpace(line))
		}
	}
	return lines
}

// TestWitnessesCosignEveryCheckpoint: with two litewitness witnesses and a
// quorum of 2, every checkpoint served carries both cosignatures, which
// torchwood's C2SP verifiers (an outside verifier: it shares no code with
// sealbox) check, and a threshold policy of both witnesses and the log
// accepts; x/mod's note.Open with the log's key alone still verifies it.
func TestWitnessesCosignEveryCheckpoint(t *testing.T) {
	dir := t.TempDir()
	logKey := newLogKey(t, dir)
	w1 := witnesstest.Start(t, "witness.example/one", logKey)
	w2 := witnesstest.Start(t, "witness.example/two", logKey)
	l := serveWitnessed(t, dir, logKey, 2, w1.Flag(), w2.Flag())
	for size := int64(1); size <= 3; size++ {
		l.publish("cosigned@example.org")
		l.waitCosigned("checkpoint", size, []*witnesstest.Witness{w1, w2}, w1, w2)
	}
	logVerifier, _ := note.NewVerifier(logKey)
	v1, _ := torchwood.NewCosignatureVerifier(w1.VerifierKey)
	v2, _ := torchwood.NewCosignatureVerifier(w2.VerifierKey)
	policy := torchwood.ThresholdPolicy(3, torchwood.OriginPolicy(logVerifier.Name()), torchwood.SingleVerifierPolicy(logVerifier),
		torchwood.ThresholdPolicy(2, torchwood.SingleVerifierPolicy(v1), torchwood.SingleVerifierPolicy(v2)))
	cp, _, err := torchwood.VerifyCheckpoint(get(t, l.url+"/v1/transparency/checkpoint"), policy)
	if err != nil || cp.N != 3 {
		t.Fatalf("torchwood.VerifyCheckpoint: %v (size %d)", err, cp.N)
	}
	if ready := string(get(t, l.url+"/readyz")); !strings.Contains(ready, `"witnesses":"ok"`) {
		t.Fatalf("/readyz: %s", ready)
	}
	if got := l.metric("sealbox_witness_tree_size", w2.Name); len(got) != 1 || !strings.HasSuffix(got[0], " 3") {
		t.Fatalf("tree size metric of %s: %q", w2.Name, got)
	}
}

// recorder sits in front of a witness: it keeps the first line, the number
// of proof lines and the answer's status of every add-checkpoint, and drops
// the connection when the witness behind it is down, as an unreachable host
// does.
type recorder struct {
	mu       sync.Mutex
	requests []string // "old N, P proof lines[: status]"
	target   string
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	head, _, _ := bytes.Cut(body, []byte("\n\n"))
	lines := strings.Split(string(head), "\n")
	r.mu.Lock()
	r.requests = append(r.requests, fmt.Sprintf("%s, %d proof lines", lines[0], len(lines)-1))
	r.mu.Unlock()
	resp, err := http.Post(r.target+req.URL.Path, "text/plain", bytes.NewReader(body))
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	defer resp.Body.Close()
	r.mu.Lock()
	r.requests[len(r.requests)-1] += fmt.Sprintf(": %d", resp.StatusCode)
	r.mu.Unlock()
	answer, _ := io.ReadAll(resp.Body)
	w.WriteHeader(resp.StatusCode)
	w.Write(answer)
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.requests
	r.requests = nil
	return got
}

// TestWitnessCatchesUp: a witness that does not know the log yet refuses
// (403), which is logged and counted, and cosigns once it is told the log;
// a witness that was down is counted unreachable and, back up, catches up
// on the checkpoints it missed with one request and one consistency proof
// from the size it last accepted.
func TestWitnessCatchesUp(t *testing.T) {
	dir := t.TempDir()
	logKey := newLogKey(t, dir)
	w1 := witnesstest.Start(t, "witness.example/steady", logKey)
	w2 := witnesstest.Start(t, "witness.example/late", "")
	rec := &recorder{target: w2.URL}
	proxy := httptest.NewServer(rec)
	defer proxy.Close()
	l := serveWitnessed(t, dir, logKey, 1, w1.Flag(), w2.VerifierKey+"="+proxy.URL)
	l.publish("late@example.org")
	l.waitCosigned("checkpoint", 1, []*witnesstest.Witness{w1}, w1, w2)
	for deadline := time.Now().Add(10 * time.Second); len(l.metric("sealbox_witness_refusals_total", w2.Name, `reason="forbidden"`)) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no forbidden refusal counted:\n%s", l.metric("sealbox_witness"))
		}
	}
	if !strings.Contains(l.logs.String(), "does not accept this log") {
		t.Fatalf("the 403 is not logged:\n%s", l.logs)
	}

	w2.AddLog(t, logKey)
	l.waitCosigned("checkpoint/latest", 1, []*witnesstest.Witness{w1, w2}, w1, w2)

	w2.Stop()
	l.publish("late@example.org")
	l.publish("late@example.org")
	l.waitCosigned("checkpoint/latest", 3, []*witnesstest.Witness{w1}, w1, w2)
	for deadline := time.Now().Add(10 * time.Second); len(l.metric("sealbox_witness_refusals_total", w2.Name, `reason="unreachable"`)) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no unreachable refusal counted:\n%s", l.metric("sealbox_witness"))
		}
	}
	rec.take()
	w2.Restart(t)
	l.waitCosigned("checkpoint/latest", 3, []*witnesstest.Witness{w1, w2}, w1, w2)
	// Of the requests since the restart, the one the witness answered
	// carried the whole catch-up: from size 1, one proof; the others found
	// it still down.
	got := rec.take()
	if answered := slices.DeleteFunc(slices.Clone(got), func(r string) bool { return !strings.Contains(r, ": ") }); !slices.Equal(answered, []string{"old 1, 2 proof lines: 200"}) {
		t.Fatalf("add-checkpoint requests since the witness came back: %q", got)
	}
	// Once it cosigned, it is not asked again until the tree grows.
	time.Sleep(3 * testCheckpointInterval)
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("add-checkpoint requests to a witness that cosigned the newest checkpoint: %q", got)
	}
}

// TestWitnessConflictAfterRestoreFromOlderBackup: a server restored from a
// backup older than what the witnesses saw signs another tree at a size
// they already cosigned; they refuse it (409 then a failed consistency
// proof), and the conflict shows in the log, the metrics and /readyz, while
// /v1/transparency/checkpoint keeps serving the last checkpoint they
// cosigned.
func TestWitnessConflictAfterRestoreFromOlderBackup(t *testing.T) {
	dir := t.TempDir()
	logKey := newLogKey(t, dir)
	w := witnesstest.Start(t, "witness.example/conflict", logKey)
	l := serveWitnessed(t, dir, logKey, 1, w.Flag())
	l.publish("fork@example.org")
	l.publish("fork@example.org")
	l.waitCosigned("checkpoint", 2, []*witnesstest.Witness{w}, w)
	backup := filepath.Join(t.TempDir(), "backup")
	mustCLI(t, "", "backup", backup, "--data", dir)
	l.publish("fork@example.org")
	l.waitCosigned("checkpoint", 3, []*witnesstest.Witness{w}, w)
	l.stop()

	restored := filepath.Join(t.TempDir(), "restored")
	mustCLI(t, "", "restore", backup, "--data", restored)
	r := serveWitnessed(t, restored, logKey, 1, w.Flag())
	// Another third record than the one the witness saw. (Until it is
	// published, the restored log is smaller than what the witness saw: a
	// rollback, a conflict too.)
	r.publish("other@example.org")
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(r.logs.String(), "it saw another tree at that size"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the conflict is not logged:\n%s", r.logs)
		}
	}
	if got := r.metric("sealbox_witness_conflict", w.Name); len(got) != 1 || !strings.HasSuffix(got[0], " 1") {
		t.Fatalf("conflict gauge: %q", got)
	}
	if got := r.metric("sealbox_witness_refusals_total", w.Name, `reason="conflict"`); len(got) != 1 {
		t.Fatalf("conflict refusals: %q", got)
	}
	if ready := string(get(t, r.url+"/readyz")); !strings.Contains(ready, `"witnesses":"conflict: `+w.Name+`"`) {
		t.Fatalf("/readyz: %s", ready)
	}
	r.waitCosigned("checkpoint", 2, []*witnesstest.Witness{w}, w)
	if n, names := r.checkpoint("checkpoint/latest", w); n != 3 || len(names) != 0 {
		t.Fatalf("the fork's checkpoint: size %d cosigned by %v", n, names)
	}
}

// TestWitnessQuorumWithOneDown: with a quorum of 2 and one of two witnesses
// down, the checkpoint served stays the last one both cosigned, and the
// fresher one, cosigned by one, is served at checkpoint/latest.
func TestWitnessQuorumWithOneDown(t *testing.T) {
	dir := t.TempDir()
	logKey := newLogKey(t, dir)
	w1 := witnesstest.Start(t, "witness.example/up", logKey)
	w2 := witnesstest.Start(t, "witness.example/down", logKey)
	l := serveWitnessed(t, dir, logKey, 2, w1.Flag(), w2.Flag())
	l.publish("quorum@example.org")
	l.waitCosigned("checkpoint", 1, []*witnesstest.Witness{w1, w2}, w1, w2)
	w2.Stop()
	l.publish("quorum@example.org")
	l.waitCosigned("checkpoint/latest", 2, []*witnesstest.Witness{w1}, w1, w2)
	// A few more rounds change nothing.
	time.Sleep(3 * testCheckpointInterval)
	if n, names := l.checkpoint("checkpoint", w1, w2); n != 1 || len(names) != 2 {
		t.Fatalf("with one witness down: size %d cosigned by %v, want the last checkpoint both cosigned", n, names)
	}
}
