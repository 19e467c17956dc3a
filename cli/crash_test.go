package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"

	"sealbox/server/hybridsig"
	"sealbox/server/servertest"
)

// TestCrashConsistency runs the real binary, drives concurrent writers
// against it and kills it with SIGKILL at a random moment, three times on
// one data directory. After each crash `sealbox check --deep` must pass on
// the directory, and the restarted server must hold every write it
// acknowledged (answered 2xx) before the crash, byte for byte: writes that
// were in flight may or may not have landed, but never half.
func TestCrashConsistency(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and crashes it three times")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rig := newCrashRig(t, buildBinary(t), t.TempDir(), seed)
	t.Cleanup(func() {
		if rig.running {
			rig.cmd.Process.Kill()
			<-rig.exited
		}
	})
	rig.start()
	rig.setup()
	writers := crashWriters()
	for round := 1; round <= 3; round++ {
		rig.login()
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for i, w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w.write(ctx, rig, mrand.New(mrand.NewPCG(seed, uint64(round*100+i))))
			}()
		}
		// Kill somewhere in the writers' second or so of work.
		time.Sleep(700*time.Millisecond + time.Duration(rig.rng.Int64N(int64(1500*time.Millisecond))))
		rig.kill()
		cancel()
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		t.Logf("round %d: killed after %s", round, rig.ledger.summary())
		rig.check()
		rig.start()
		rig.login()
		for _, w := range writers {
			if w.verify != nil {
				w.verify(rig)
			}
		}
		if t.Failed() {
			t.Fatalf("round %d: acknowledged writes are missing after the crash; server log:\n%s", round, rig.log.String())
		}
	}
	rig.stop()
	rig.check()
}

// crashWriter is one kind of write: write loops until ctx ends, recording
// in the ledger each write the server acknowledged; verify checks after a
// restart that every recorded write is present. A new kind of write joins
// the test as one more entry of crashWriters.
type crashWriter struct {
	name   string
	write  func(ctx context.Context, rig *crashRig, rng *mrand.Rand)
	verify func(rig *crashRig)
}

// crashWriters is the writer set, run concurrently each round.
func crashWriters() []crashWriter {
	writers := []crashWriter{
		{name: "registrations", write: writeRegistrations, verify: verifyRegistrations},
		{name: "directory", write: writeDirectories, verify: verifyDirectory},
		{name: "uploads", write: writeUploads, verify: verifyBlobs},
		{name: "uploads", write: writeUploads},
		{name: "shares", write: writeShares, verify: verifyShares},
		{name: "lifecycle ops", write: writeOps, verify: verifyOps},
	}
	// Concurrent ops share their blobs' flushes (blobs.PutSmall) and their
	// store commits: the kill must find every acknowledged one of a group
	// whole. verifyOps checks the ops of every writer.
	for range crashOpWriters - 1 {
		writers = append(writers, crashWriter{name: "lifecycle ops", write: writeOps})
	}
	return writers
}

// crashOpWriters is how many lifecycle op writers run at once, each in an
// album of its own.
const crashOpWriters = 8

// crashAccount is an account whose registration was acknowledged.
type crashAccount struct {
	email, password string
}

// crashShare is an acknowledged share link.
type crashShare struct {
	id     string
	serves []string
	secret []byte
}

// crashLedger records what the server acknowledged, and for the directory
// every version attempted: a publish in flight at the kill may have landed
// without its answer arriving.
type crashLedger struct {
	mu       sync.Mutex
	accounts []crashAccount
	dirTried map[uint64][]byte
	dirAcked uint64
	blobs    map[string][]byte
	linked   map[string]bool // blobs named by an acknowledged share link
	shares   []crashShare
	ops      []crashOp
}

// crashOp is an acknowledged lifecycle op: the album's feed must hold its
// manifest at its sync_seq, and the manifest must be readable.
type crashOp struct {
	album, manifestHash string
	syncSeq             float64
	manifest            []byte
}

func (l *crashLedger) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("%d accounts, directory version %d, %d blobs, %d shares, %d lifecycle ops acknowledged",
		len(l.accounts), l.dirAcked, len(l.blobs), len(l.shares), len(l.ops))
}

// crashRig runs the binary on one data directory and talks to it.
type crashRig struct {
	t      *testing.T
	bin    string
	dir    string
	rng    *mrand.Rand
	client *http.Client
	ledger crashLedger

	// extraArgs are given to serve after the rig's own flags, extraEnv
	// added to its environment.
	extraArgs, extraEnv []string

	cmd     *exec.Cmd
	running bool // cmd has started and not yet been waited for
	exited  chan error
	log     *syncBuffer
	url     string

	owner, dirOwner  crashAccount // holds the uploads and shares; publishes the directory
	dirOwnerID       string
	dirKey           *hybridsig.DevKey
	ownerTok, dirTok string
}

func newCrashRig(t *testing.T, bin, dir string, seed uint64) *crashRig {
	return &crashRig{
		t: t, bin: bin, dir: dir,
		rng:      mrand.New(mrand.NewPCG(seed, 0)),
		client:   &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 16}},
		ledger:   crashLedger{dirTried: map[uint64][]byte{}, blobs: map[string][]byte{}, linked: map[string]bool{}},
		owner:    crashAccount{"owner@example.org", "password-owner"},
		dirOwner: crashAccount{"directory@example.org", "password-directory"},
		dirKey:   hybridsig.NewDevKey([32]byte{'c', 'r', 'a', 's', 'h'}),
	}
}

// buildBinary builds sealbox from the module root into a temp dir, with
// the build tags given.
func buildBinary(t testing.TB, tags ...string) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("go env GOMOD: %v %q", err, out)
	}
	bin := filepath.Join(t.TempDir(), "sealbox")
	build := exec.Command("go", "build", "-tags", strings.Join(tags, ","), "-o", bin, "sealbox")
	build.Dir = filepath.Dir(strings.TrimSpace(string(out)))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// serveEnv is the environment without SEALBOX_* variables, so the flags
// given here are the whole configuration.
func serveEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "SEALBOX_") })
}

// start runs `sealbox serve` on a free port and waits until it logs that
// it listens. Another process may take the port between the probe and the
// start, so a start that fails is retried on a new port.
func (rig *crashRig) start() {
	rig.t.Helper()
	for attempt := 0; attempt < 5; attempt++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			rig.t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		rig.log = &syncBuffer{ready: make(chan string, 1)}
		rig.cmd = exec.Command(rig.bin, "serve", "--data", rig.dir, "--listen", addr,
			// Verification reads every blob through share links from one
			// address, every restart signs in again from it, the directory
			// writer publishes as fast as it can, and the blob writers open
			// an upload session for every few blobs and leave it to expire;
			// none of these limits is under test here.
			"--share-rate", "1000000", "--share-burst", "1000000",
			"--auth-rate", "1000000", "--auth-burst", "1000000",
			"--directory-publishes", "3600", "--directory-burst", "1000000",
			"--max-upload-sessions", "1000000")
		rig.cmd.Args = append(rig.cmd.Args, rig.extraArgs...)
		rig.cmd.Env = append(serveEnv(), rig.extraEnv...)
		rig.cmd.Stdout = io.Discard
		rig.cmd.Stderr = rig.log
		if err := rig.cmd.Start(); err != nil {
			rig.t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func(cmd *exec.Cmd) { exited <- cmd.Wait() }(rig.cmd)
		rig.exited = exited
		select {
		case url := <-rig.log.ready:
			rig.url, rig.running = url, true
			if got, want := url, "http://"+addr; got != want {
				rig.t.Fatalf("the server listens on %s, want %s", got, want)
			}
			return
		case err := <-exited:
			rig.t.Logf("serve on %s exited at start (%v); retrying:\n%s", addr, err, rig.log.String())
		case <-time.After(30 * time.Second):
			rig.cmd.Process.Kill()
			<-exited
			rig.t.Fatalf("serve did not start within 30s:\n%s", rig.log.String())
		}
	}
	rig.t.Fatal("serve did not start on any of 5 ports")
}

// kill ends the server with SIGKILL: no shutdown code runs.
func (rig *crashRig) kill() {
	rig.t.Helper()
	if err := rig.cmd.Process.Kill(); err != nil {
		rig.t.Fatal(err)
	}
	<-rig.exited
	rig.running = false
	rig.client.CloseIdleConnections()
}

// stop ends the server with SIGTERM and expects a clean exit.
func (rig *crashRig) stop() {
	rig.t.Helper()
	rig.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-rig.exited:
		rig.running = false
		if err != nil {
			rig.t.Fatalf("serve after SIGTERM: %v\n%s", err, rig.log.String())
		}
	case <-time.After(60 * time.Second):
		rig.t.Fatal("serve did not stop within 60s of SIGTERM")
	}
	rig.client.CloseIdleConnections()
}

// check runs `sealbox check --deep` on the data directory while no server
// runs (it opens the store directly).
func (rig *crashRig) check() {
	rig.t.Helper()
	cmd := exec.Command(rig.bin, "check", "--deep", "--data", rig.dir)
	cmd.Env = serveEnv()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil || !strings.HasPrefix(out.String(), "ok:") {
		rig.t.Fatalf("sealbox check --deep: %v\n%s%s", err, out.String(), errOut.String())
	}
}

// send makes one request. ok is false when no complete answer arrived (the
// server died): such a write is not acknowledged.
func (rig *crashRig) send(method, path, token, contentType string, body []byte, header map[string]string) (status int, resp []byte, ok bool) {
	req := servertest.Req{Method: method, Path: path, Token: token, ContentType: contentType, Header: header}
	if len(body) > 0 {
		req.Body = body
	}
	r, err := servertest.Client{BaseURL: rig.url, HTTP: rig.client}.Send(req)
	if err != nil {
		return 0, nil, false
	}
	return r.Status, r.Body, true
}

func (rig *crashRig) sendJSON(method, path, token string, body any) (int, []byte, bool) {
	raw, err := json.Marshal(body)
	if err != nil {
		rig.t.Fatal(err)
	}
	return rig.send(method, path, token, "application/json", raw, nil)
}

// must is send for the verification steps, where the server is up and any
// failure is the test's.
func (rig *crashRig) must(method, path, token, contentType string, body []byte, want int) []byte {
	rig.t.Helper()
	status, resp, ok := rig.send(method, path, token, contentType, body, nil)
	if !ok || status != want {
		rig.t.Errorf("%s %s: got %d (complete: %v), want %d: %s", method, path, status, ok, want, resp)
		return nil
	}
	return resp
}

// unexpected reports an answer a writer cannot get from a live server.
func (rig *crashRig) unexpected(what string, status int, body []byte) {
	rig.t.Errorf("%s: unexpected status %d: %s", what, status, body)
}

// setup registers the accounts the writers use, once for the whole test.
func (rig *crashRig) setup() {
	rig.t.Helper()
	for _, a := range []crashAccount{rig.owner, rig.dirOwner} {
		rig.must("POST", "/v1/auth/register", "", "application/json",
			mustJSON(rig.t, map[string]string{"email": a.email, "password": a.password}), http.StatusOK)
		rig.ledger.accounts = append(rig.ledger.accounts, a)
	}
}

// login signs the writers' accounts in on the (re)started server.
func (rig *crashRig) login() {
	rig.t.Helper()
	rig.ownerTok = rig.token(rig.owner)
	rig.dirTok = rig.token(rig.dirOwner)
	var p struct {
		UserID string `json:"user_id"`
	}
	json.Unmarshal(rig.must("GET", "/v1/auth/profile", rig.dirTok, "", nil, http.StatusOK), &p)
	rig.dirOwnerID = p.UserID
	if rig.t.Failed() {
		rig.t.FailNow()
	}
}

func (rig *crashRig) token(a crashAccount) string {
	rig.t.Helper()
	var pair struct {
		AccessToken string `json:"access_token"`
	}
	body := rig.must("POST", "/v1/auth/login", "", "application/json",
		mustJSON(rig.t, map[string]string{"email": a.email, "password": a.password}), http.StatusOK)
	json.Unmarshal(body, &pair)
	return pair.AccessToken
}

func mustJSON(t *testing.T, v any) []byte {
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// writeRegistrations registers new accounts one after another. Each costs
// a production argon2 hash, so this writer is slow by design.
func writeRegistrations(ctx context.Context, rig *crashRig, rng *mrand.Rand) {
	for ctx.Err() == nil {
		a := crashAccount{
			email:    fmt.Sprintf("crash-%016x@example.org", rng.Uint64()),
			password: fmt.Sprintf("password-%016x", rng.Uint64()),
		}
		status, body, ok := rig.sendJSON("POST", "/v1/auth/register", "", map[string]string{"email": a.email, "password": a.password})
		switch {
		case !ok:
			continue
		case status != http.StatusOK:
			rig.unexpected("register", status, body)
			return
		}
		rig.ledger.mu.Lock()
		rig.ledger.accounts = append(rig.ledger.accounts, a)
		rig.ledger.mu.Unlock()
	}
}

// verifyRegistrations: every acknowledged account signs in with its
// password.
func verifyRegistrations(rig *crashRig) {
	rig.ledger.mu.Lock()
	accounts := slices.Clone(rig.ledger.accounts)
	rig.ledger.mu.Unlock()
	work := make(chan crashAccount)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range work {
				status, body, ok := rig.sendJSON("POST", "/v1/auth/login", "", map[string]string{"email": a.email, "password": a.password})
				if !ok || status != http.StatusOK {
					rig.t.Errorf("login %s after the crash: %d %s", a.email, status, body)
				}
			}
		}()
	}
	for _, a := range accounts {
		work <- a
	}
	close(work)
	wg.Wait()
}

// dirCBOR is deterministic, so a version's bytes are what was sent.
var dirCBOR, _ = cbor.CoreDetEncOptions().EncMode()

// writeDirectories publishes ever higher directory versions of one
// account. The version counter lives in the ledger, so versions keep rising
// across rounds above any publish that landed unacknowledged.
func writeDirectories(ctx context.Context, rig *crashRig, rng *mrand.Rand) {
	key := rig.dirKey.PublicKeyBase64()
	for ctx.Err() == nil {
		devices := make([]byte, 64+rng.IntN(4096))
		fillRandom(rng, devices)
		rig.ledger.mu.Lock()
		version := uint64(len(rig.ledger.dirTried)) + 1
		body, err := dirCBOR.Marshal(map[string]any{"directory_version": version, "devices": devices})
		if err != nil {
			rig.ledger.mu.Unlock()
			rig.t.Error(err)
			return
		}
		rig.ledger.dirTried[version] = body
		rig.ledger.mu.Unlock()
		status, resp, ok := rig.send("POST", "/v1/auth/devices/directory", rig.dirTok, "application/cbor", body,
			map[string]string{"X-Service-Identity-Key": key})
		switch {
		case !ok:
			continue
		case status != http.StatusOK:
			rig.unexpected("publish directory", status, resp)
			return
		}
		rig.ledger.mu.Lock()
		rig.ledger.dirAcked = max(rig.ledger.dirAcked, version)
		rig.ledger.mu.Unlock()
	}
}

// verifyDirectory: the directory is the last acknowledged version or a
// later attempted one, byte for byte, under the pinned key.
func verifyDirectory(rig *crashRig) {
	rig.ledger.mu.Lock()
	acked, tried := rig.ledger.dirAcked, copyVersions(rig.ledger.dirTried)
	rig.ledger.mu.Unlock()
	status, body, ok := rig.send("GET", "/v1/auth/devices/directory/"+rig.dirOwnerID, rig.ownerTok, "", nil, nil)
	if acked == 0 && ok && status == http.StatusNotFound {
		return
	}
	if !ok || status != http.StatusOK {
		rig.t.Errorf("GET directory: %d %s", status, body)
		return
	}
	var head struct {
		Version uint64 `cbor:"directory_version"`
	}
	if err := cbor.Unmarshal(body, &head); err != nil {
		rig.t.Errorf("stored directory is not CBOR: %v", err)
		return
	}
	if head.Version < acked {
		rig.t.Errorf("directory version %d, but %d was acknowledged", head.Version, acked)
	}
	if !bytes.Equal(body, tried[head.Version]) {
		rig.t.Errorf("directory version %d: the bytes are not the ones published", head.Version)
	}
}

func copyVersions(m map[uint64][]byte) map[uint64][]byte {
	c := make(map[uint64][]byte, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func fillRandom(rng *mrand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}

// writeUploads opens albums and upload sessions and puts blobs of random
// size (up to 1 MiB) through them.
func writeUploads(ctx context.Context, rig *crashRig, rng *mrand.Rand) {
	for ctx.Err() == nil {
		album := randomUUID(rng)
		status, body, ok := rig.sendJSON("POST", "/v1/albums", rig.ownerTok, map[string]string{"album_id": album})
		if !ok {
			continue
		}
		if status != http.StatusCreated {
			rig.unexpected("create album", status, body)
			return
		}
		status, body, ok = rig.send("POST", "/v1/albums/"+album+"/uploads", rig.ownerTok, "", nil, nil)
		if !ok {
			continue
		}
		if status != http.StatusCreated {
			rig.unexpected("open upload", status, body)
			return
		}
		var up struct {
			UploadID string `json:"upload_id"`
		}
		json.Unmarshal(body, &up)
		for range 1 + rng.IntN(4) {
			size := 1 + rng.IntN(64<<10)
			if rng.IntN(10) == 0 {
				size = 1 + rng.IntN(1<<20)
			}
			data := make([]byte, size)
			fillRandom(rng, data)
			hash := hashHex(data)
			status, body, ok := rig.send("PUT", "/v1/uploads/"+up.UploadID+"/blobs/"+hash, rig.ownerTok, "application/octet-stream", data, nil)
			if !ok {
				break
			}
			if status != http.StatusCreated {
				rig.unexpected("put blob", status, body)
				return
			}
			rig.ledger.mu.Lock()
			rig.ledger.blobs[hash] = data
			rig.ledger.mu.Unlock()
		}
	}
}

// writeShares registers share links over acknowledged blobs no
// acknowledged link names yet; some links carry a wrapped secret.
func writeShares(ctx context.Context, rig *crashRig, rng *mrand.Rand) {
	for ctx.Err() == nil {
		rig.ledger.mu.Lock()
		var serves []string
		for h := range rig.ledger.blobs {
			if !rig.ledger.linked[h] && len(serves) < 8 {
				serves = append(serves, h)
			}
		}
		rig.ledger.mu.Unlock()
		if len(serves) == 0 {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		sh := newCrashShare(rng, serves)
		status, body, ok := rig.registerShare(sh)
		switch {
		case !ok:
			continue
		case status != http.StatusCreated:
			rig.unexpected("register share", status, body)
			return
		}
		rig.ledger.addShare(sh)
	}
}

func newCrashShare(rng *mrand.Rand, serves []string) crashShare {
	id := make([]byte, 16)
	fillRandom(rng, id)
	sh := crashShare{id: hex.EncodeToString(id), serves: serves}
	if rng.IntN(2) == 0 {
		sh.secret = make([]byte, 1+rng.IntN(256))
		fillRandom(rng, sh.secret)
	}
	return sh
}

func (rig *crashRig) registerShare(sh crashShare) (int, []byte, bool) {
	req := map[string]any{"opaque_id": sh.id, "metadata_hash": sh.serves[0], "serves": sh.serves}
	if sh.secret != nil {
		req["wrapped_secret"] = base64.StdEncoding.EncodeToString(sh.secret)
	}
	return rig.sendJSON("POST", "/v1/shares", rig.ownerTok, req)
}

func (l *crashLedger) addShare(sh crashShare) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.shares = append(l.shares, sh)
	for _, h := range sh.serves {
		l.linked[h] = true
	}
}

// verifyBlobs: acknowledged blobs that no acknowledged link names yet get
// one now. Its registration succeeds only if the owner still holds every
// blob (error.share.blob_not_owned otherwise); verifyShares then reads
// them all back.
func verifyBlobs(rig *crashRig) {
	rig.ledger.mu.Lock()
	var unlinked []string
	for h := range rig.ledger.blobs {
		if !rig.ledger.linked[h] {
			unlinked = append(unlinked, h)
		}
	}
	rig.ledger.mu.Unlock()
	for chunk := range slices.Chunk(unlinked, 100) {
		sh := newCrashShare(rig.rng, chunk)
		if status, body, ok := rig.registerShare(sh); !ok || status != http.StatusCreated {
			rig.t.Errorf("share over acknowledged blobs after the crash: %d %s", status, body)
			continue
		}
		rig.ledger.addShare(sh)
	}
}

// verifyShares: every acknowledged link answers its metadata and wrapped
// secret, and every blob it names reads back byte-identical.
func verifyShares(rig *crashRig) {
	rig.ledger.mu.Lock()
	shares := slices.Clone(rig.ledger.shares)
	blobs := make(map[string][]byte, len(rig.ledger.blobs))
	for h, b := range rig.ledger.blobs {
		blobs[h] = b
	}
	rig.ledger.mu.Unlock()
	for _, sh := range shares {
		var meta struct {
			MetadataHash        string `json:"metadata_hash"`
			PassphraseProtected bool   `json:"passphrase_protected"`
		}
		json.Unmarshal(rig.must("GET", "/s/"+sh.id, "", "", nil, http.StatusOK), &meta)
		if meta.MetadataHash != sh.serves[0] || meta.PassphraseProtected != (sh.secret != nil) {
			rig.t.Errorf("share %s metadata: got %+v", sh.id, meta)
		}
		if sh.secret != nil {
			if got := rig.must("GET", "/s/"+sh.id+"/wrapped-secret", "", "", nil, http.StatusOK); !bytes.Equal(got, sh.secret) {
				rig.t.Errorf("share %s: the wrapped secret differs", sh.id)
			}
		}
		for _, h := range sh.serves {
			got := rig.must("GET", "/s/"+sh.id+"/blob/"+h, "", "", nil, http.StatusOK)
			if !bytes.Equal(got, blobs[h]) {
				rig.t.Errorf("blob %s through share %s: %d bytes, want %d identical ones", h, sh.id, len(got), len(blobs[h]))
			}
		}
	}
}

// syncBuffer collects the server's log and, when ready is set, reports the
// URL of its "sealbox listening" line on it.
type syncBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	partial []byte
	ready   chan string
	seen    bool
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	b.partial = append(b.partial, p...)
	for {
		i := bytes.IndexByte(b.partial, '\n')
		if i < 0 {
			break
		}
		line := b.partial[:i]
		b.partial = b.partial[i+1:]
		var entry struct {
			Message string `json:"message"`
			URL     string `json:"url"`
		}
		if b.ready != nil && !b.seen && json.Unmarshal(line, &entry) == nil && entry.Message == "sealbox listening" {
			b.seen = true
			b.ready <- entry.URL
		}
	}
	return len(p), nil
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// writeOps creates assets in an album of the owner by signed lifecycle
// manifests, each over a ciphertext blob uploaded for it, the way a client
// commits an upload.
func writeOps(ctx context.Context, rig *crashRig, rng *mrand.Rand) {
	var p struct {
		UserID string `json:"user_id"`
	}
	status, body, ok := rig.send("GET", "/v1/auth/profile", rig.ownerTok, "", nil, nil)
	if !ok {
		return
	}
	json.Unmarshal(body, &p)
	album := randomUUID(rng)
	if status, body, ok = rig.sendJSON("POST", "/v1/albums", rig.ownerTok, map[string]string{"album_id": album}); !ok {
		return
	} else if status != http.StatusCreated {
		rig.unexpected("create album", status, body)
		return
	}
	var pin struct {
		ProtocolVersion string `json:"protocol_version"`
	}
	json.Unmarshal(body, &pin)
	for ctx.Err() == nil {
		status, body, ok := rig.send("POST", "/v1/albums/"+album+"/uploads", rig.ownerTok, "", nil, nil)
		if !ok {
			return
		}
		var up struct {
			UploadID string `json:"upload_id"`
		}
		json.Unmarshal(body, &up)
		ciphertext := make([]byte, 1+rng.IntN(16<<10))
		fillRandom(rng, ciphertext)
		if status, body, ok = rig.send("PUT", "/v1/uploads/"+up.UploadID+"/blobs/"+hashHex(ciphertext), rig.ownerTok, "application/octet-stream", ciphertext, nil); !ok {
			return
		} else if status != http.StatusCreated {
			rig.unexpected("put ciphertext", status, body)
			return
		}
		rig.send("DELETE", "/v1/uploads/"+up.UploadID, rig.ownerTok, "", nil, nil)
		manifest := make([]byte, 200+rng.IntN(800))
		fillRandom(rng, manifest)
		metadata := make([]byte, 1+rng.IntN(2048))
		fillRandom(rng, metadata)
		op := map[string]any{
			"manifest_envelope": map[string]any{
				"crypto_suite_id": 1, "protocol_version": pin.ProtocolVersion, "album_id": album, "file_id": randomUUID(rng),
				"amk_version": 0, "ciphertext_hash": hashHex(ciphertext), "plaintext_size": len(ciphertext), "chunk_size": 65536,
				"key_mode": "derived", "metadata_blob_hash": hashHex(metadata), "created_by_user": p.UserID,
				"created_by_device": randomUUID(rng), "client_version": "crash-test/1", "timestamp": "2026-11-22T10:00:00Z",
				"action": "create",
			},
			"manifest_cbor": base64.StdEncoding.EncodeToString(manifest),
			"metadata_blob": base64.StdEncoding.EncodeToString(metadata),
		}
		status, body, ok = rig.sendJSON("POST", "/v1/albums/"+album+"/ops", rig.ownerTok, op)
		if !ok {
			return
		}
		if status != http.StatusOK {
			rig.unexpected("lifecycle op", status, body)
			return
		}
		var res struct {
			SyncSeq float64 `json:"sync_seq"`
		}
		json.Unmarshal(body, &res)
		rig.ledger.mu.Lock()
		rig.ledger.ops = append(rig.ledger.ops, crashOp{album: album, manifestHash: hashHex(manifest), syncSeq: res.SyncSeq, manifest: manifest})
		rig.ledger.blobs[hashHex(ciphertext)] = ciphertext
		rig.ledger.blobs[hashHex(metadata)] = metadata
		rig.ledger.mu.Unlock()
	}
}

// verifyOps: every acknowledged op is in its album's feed at the position
// it was given, and its manifest is stored byte for byte (it is held by the
// owner, so a share link over it serves it).
func verifyOps(rig *crashRig) {
	rig.ledger.mu.Lock()
	ops := slices.Clone(rig.ledger.ops)
	rig.ledger.mu.Unlock()
	feeds := map[string]map[float64]string{}
	for _, op := range ops {
		if feeds[op.album] == nil {
			var feed struct {
				Entries []struct {
					SyncSeq      float64 `json:"sync_seq"`
					ManifestHash string  `json:"manifest_hash"`
				} `json:"entries"`
			}
			json.Unmarshal(rig.must("GET", "/v1/albums/"+op.album+"/feed?limit=5000", rig.ownerTok, "", nil, http.StatusOK), &feed)
			feeds[op.album] = map[float64]string{}
			for _, e := range feed.Entries {
				feeds[op.album][e.SyncSeq] = e.ManifestHash
			}
		}
		if got := feeds[op.album][op.syncSeq]; got != op.manifestHash {
			rig.t.Errorf("album %s sync_seq %v: feed has manifest %q, want %s", op.album, op.syncSeq, got, op.manifestHash)
		}
	}
	for i := 0; i < len(ops); i += 100 {
		batch := ops[i:min(i+100, len(ops))]
		var serves []string
		for _, op := range batch {
			serves = append(serves, op.manifestHash)
		}
		link := fmt.Sprintf("%032x", rig.rng.Uint64())
		rig.must("POST", "/v1/shares", rig.ownerTok, "application/json",
			mustJSON(rig.t, map[string]any{"opaque_id": link, "metadata_hash": serves[0], "serves": serves}), http.StatusCreated)
		for _, op := range batch {
			if got := rig.must("GET", "/s/"+link+"/blob/"+op.manifestHash, "", "", nil, http.StatusOK); !bytes.Equal(got, op.manifest) {
				rig.t.Errorf("manifest %s is not byte-identical after the crash", op.manifestHash)
			}
		}
	}
}

func randomUUID(rng *mrand.Rand) string {
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", rng.Uint32(), rng.IntN(1<<16), rng.IntN(1<<12), rng.IntN(1<<12), rng.Int64N(1<<48))
}
