package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sealbox/blobs/s3test"
	"sealbox/cli/admin"
	"sealbox/cli/media/mediatest"
	"sealbox/kv/pgtest"
)

// TestTwoNodes runs two `sealbox serve` processes on one PostgreSQL
// database and one bucket behind a loopback round-robin proxy, as an
// instance past one machine runs, and proves that nothing assumes one
// process: one refresh token sent to both nodes at once rotates exactly
// once; concurrent replaces of one chain head apply exactly once, with no
// gap in sync_seq; a tus upload whose PATCHes alternate between the nodes
// completes, and its blob is read by ranges through both; after kill -9 of
// one node in the middle of a PATCH and a burst of lifecycle ops, the other
// serves every acknowledged write, the client resumes its transfer there,
// the account's usage is the sum of what it holds, and check --deep is
// clean.
func TestTwoNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	if !pgtest.Enabled() || !s3test.Enabled() {
		t.Skip("needs SEALBOX_TEST_PG and SEALBOX_TEST_S3")
	}
	bin := buildBinary(t)
	store, bucket := pgtest.URL(t), s3test.URL(t)
	nodeArgs := []string{"--store", store, "--blobs", bucket, "--registration", "open",
		// A killed node's claim on a transfer lapses after this.
		"--tus-lease", "2s"}
	a := newCrashRig(t, bin, t.TempDir(), 1)
	a.extraArgs = nodeArgs
	a.start()
	defer stopIfRunning(a)
	// The second node gets the first one's keys, as the README says.
	b := newCrashRig(t, bin, t.TempDir(), 2)
	b.extraArgs = nodeArgs
	for _, name := range []string{admin.KeyFile, admin.LogKeyFile} {
		raw, err := os.ReadFile(filepath.Join(a.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(b.dir, name), raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b.start()
	defer stopIfRunning(b)
	lb := roundRobin(t, a, b)

	const email, password = "two@example.org", "password-two-nodes"
	lb.must("POST", "/v1/auth/register", "", "application/json", mustJSON(t, map[string]string{"email": email, "password": password}), http.StatusOK)
	token := lb.token(crashAccount{email, password})

	t.Run("refresh once", func(t *testing.T) { refreshOnceAcrossNodes(t, lb, a, b, email, password) })

	w := newTwoNodeWriter(t, lb, token)
	t.Run("chain head", func(t *testing.T) { replaceOnceAcrossNodes(t, w, a, b) })

	video := make([]byte, 7<<20+12345)
	fillRandom(a.rng, video)
	t.Run("tus alternating", func(t *testing.T) {
		loc := w.createTransfer(video)
		const piece = 1 << 20
		for i, off := 0, 0; off < len(video); i++ {
			node := []*crashRig{a, b}[i%2]
			end := min(off+piece, len(video))
			status, body, _ := node.send("PATCH", loc, token, "application/offset+octet-stream", video[off:end], tusHeaders(off))
			if status != http.StatusNoContent {
				t.Fatalf("PATCH %d-%d on node %d: %d %s", off, end, i%2, status, body)
			}
			off = end
		}
		w.held(video)
		link := w.share(video)
		for _, node := range []*crashRig{a, b} {
			for _, r := range [][2]int{{0, 99}, {5<<20 - 10, 5<<20 + 10}, {len(video) - 1000, len(video) - 1}} {
				status, got, _ := node.send("GET", "/s/"+link+"/blob/"+hashHex(video), "", "", nil, map[string]string{"Range": fmt.Sprintf("bytes=%d-%d", r[0], r[1])})
				if status != http.StatusPartialContent || !bytes.Equal(got, video[r[0]:r[1]+1]) {
					t.Fatalf("range %v through %s: %d, %d bytes", r, node.url, status, len(got))
				}
			}
		}
	})

	t.Run("kill during a PATCH", func(t *testing.T) {
		large := make([]byte, 9<<20)
		fillRandom(a.rng, large)
		loc := w.createTransfer(large)
		// A PATCH to node a whose body stalls after 3 MiB, so the node is
		// killed with the request in flight.
		body, feed := io.Pipe()
		patched := make(chan int, 1)
		go func() {
			req, _ := http.NewRequest("PATCH", a.url+loc, body)
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/offset+octet-stream")
			for k, v := range tusHeaders(0) {
				req.Header.Set(k, v)
			}
			resp, err := a.client.Do(req)
			if err != nil {
				patched <- 0
				return
			}
			resp.Body.Close()
			patched <- resp.StatusCode
		}()
		if _, err := feed.Write(large[:3<<20]); err != nil {
			t.Fatal(err)
		}
		before := w.acknowledged()
		var burst sync.WaitGroup
		for i := range 16 {
			burst.Go(func() { w.createAsset([]*crashRig{a, b}[i%2]) })
		}
		// Kill node a once part of the burst is acknowledged, so the rest is
		// in flight on it or still to come.
		for deadline := time.Now().Add(30 * time.Second); w.acknowledged() < before+4 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		a.kill()
		burst.Wait()
		w.resendUnanswered(b)
		feed.CloseWithError(io.ErrUnexpectedEOF)
		if status := <-patched; status == http.StatusNoContent {
			t.Fatal("the interrupted PATCH was answered 204")
		}

		// The client resumes on node b: once node a's claim has lapsed the
		// transfer takes the rest from the offset b reports.
		deadline := time.Now().Add(20 * time.Second)
		for {
			off := tusOffset(t, b, loc, token)
			status, body, _ := b.send("PATCH", loc, token, "application/offset+octet-stream", large[off:], tusHeaders(off))
			if status == http.StatusNoContent {
				break
			}
			if status != http.StatusLocked || time.Now().After(deadline) {
				t.Fatalf("resume on node b from %d: %d %s", off, status, body)
			}
			time.Sleep(200 * time.Millisecond)
		}
		w.held(large)
	})

	// Node b alone now: every acknowledged write is there.
	w.lb = b
	w.verify()
	var users []admin.User
	out := runBin(t, bin, "users", "list", "--json", "--data", b.dir, "--store", store, "--blobs", bucket)
	if err := json.Unmarshal(out, &users); err != nil || len(users) != 1 {
		t.Fatalf("users list: %v %s", err, out)
	}
	if users[0].BytesHeld != w.heldBytes() || users[0].BlobsHeld != len(w.blobs) {
		t.Fatalf("the account holds %d blobs, %d bytes; the writes acknowledged %d blobs, %d bytes",
			users[0].BlobsHeld, users[0].BytesHeld, len(w.blobs), w.heldBytes())
	}
	if out := runBin(t, bin, "check", "--deep", "--data", b.dir, "--store", store, "--blobs", bucket); !bytes.HasPrefix(out, []byte("ok:")) {
		t.Fatalf("check --deep: %s", out)
	}
	// A backup of the instance is a data directory of one box: restore
	// checks every blob copied from the bucket.
	backup, restored := filepath.Join(t.TempDir(), "backup"), filepath.Join(t.TempDir(), "restored")
	runBin(t, bin, "backup", backup, "--data", b.dir, "--store", store, "--blobs", bucket)
	runBin(t, bin, "restore", backup, "--data", restored)
	out = runBin(t, bin, "users", "list", "--json", "--data", restored)
	if err := json.Unmarshal(out, &users); err != nil || len(users) != 1 || users[0].BytesHeld != w.heldBytes() {
		t.Fatalf("users of the restored backup: %v %s", err, out)
	}

	// Node a back: a person links a second device, each device talking to
	// its own node (the relay, the directory and the log in the one store).
	a.start()
	t.Run("link across nodes", func(t *testing.T) { linkAcrossNodes(t, bin, a.url, b.url) })
}

// linkAcrossNodes: device A signs up and syncs through one node, device B
// is linked through the other: the same comparison string, the keys, an
// export byte for byte; then sign-out everywhere from B ends both.
func linkAcrossNodes(t *testing.T, bin, nodeA, nodeB string) {
	rig := &clientRig{t: t, bin: bin, profile: filepath.Join(t.TempDir(), "computer")}
	folder := filepath.Join(t.TempDir(), "Lake")
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	photo := mediatest.JPEG(24, 16, 5, mediatest.EXIF{})
	if err := os.WriteFile(filepath.Join(folder, "pier.jpg"), photo, 0o644); err != nil {
		t.Fatal(err)
	}
	rig.mustRun(0, linkPassword+"\n"+linkPassword+"\n", "signup", nodeA, "--email", "family@example.org", "--password-stdin")
	rig.mustRun(0, "", "sync", folder)
	phone := filepath.Join(t.TempDir(), "phone")
	devA, devB, sasA, sasB, _ := linkStart(t, rig, phone, nodeB, false)
	if sasA != sasB {
		t.Fatalf("the devices show %s and %s", sasA, sasB)
	}
	devA.say(sasB)
	devA.wait(0)
	devB.wait(0)
	dest := filepath.Join(t.TempDir(), "export")
	if _, errOut, code := rig.runAs(phone, "", "export", dest); code != 0 {
		t.Fatalf("export on the linked device: exit %d: %s", code, errOut)
	}
	if got, err := os.ReadFile(filepath.Join(dest, "Lake", "pier.jpg")); err != nil || !bytes.Equal(got, photo) {
		t.Fatalf("the photo exported on the linked device: %v", err)
	}
	if out, errOut, code := rig.runAs(phone, "", "sign-out-everywhere", "--json"); code != 0 || strings.TrimSpace(out) != `{"revoked":2}` {
		t.Fatalf("sign-out-everywhere: exit %d: %s%s", code, out, errOut)
	}
	if _, errOut, code := rig.run("", "status"); code != 2 || !strings.Contains(errOut, "the session has ended; sign in again") {
		t.Fatalf("device A after sign-out everywhere: exit %d: %s", code, errOut)
	}
}

// stopIfRunning ends a node the test left running.
func stopIfRunning(rig *crashRig) {
	if rig.running {
		rig.stop()
	}
}

// runBin runs the built binary with the test's environment (credentials
// for the bucket included) and returns its standard output; it fails the
// test on a non-zero exit.
func runBin(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = serveEnv()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("sealbox %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.Bytes()
}

// roundRobin is a loopback reverse proxy that sends each request to the
// next node in turn, and a rig that talks to it.
func roundRobin(t *testing.T, nodes ...*crashRig) *crashRig {
	var next atomic.Uint64
	targets := make([]*url.URL, len(nodes))
	for i, n := range nodes {
		targets[i], _ = url.Parse(n.url)
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(targets[next.Add(1)%uint64(len(targets))])
	}}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	rig := newCrashRig(t, "", "", 3)
	rig.url = srv.URL
	return rig
}

// tusHeaders are a tus request's headers; off < 0 leaves Upload-Offset out.
func tusHeaders(off int) map[string]string {
	h := map[string]string{"Tus-Resumable": "1.0.0"}
	if off >= 0 {
		h["Upload-Offset"] = strconv.Itoa(off)
	}
	return h
}

// call makes one request to node and returns the whole answer; ok is false
// when none arrived.
func call(node *crashRig, method, path, token string, body []byte, header map[string]string) (status int, h http.Header, resp []byte, ok bool) {
	req, err := http.NewRequest(method, node.url+path, bytes.NewReader(body))
	if err != nil {
		node.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	r, err := node.client.Do(req)
	if err != nil {
		return 0, nil, nil, false
	}
	defer r.Body.Close()
	if resp, err = io.ReadAll(r.Body); err != nil {
		return 0, nil, nil, false
	}
	return r.StatusCode, r.Header, resp, true
}

// refreshOnceAcrossNodes sends one refresh token to both nodes at the same
// moment, several times: each time exactly one rotation succeeds and the
// other presentation is refused as spent.
func refreshOnceAcrossNodes(t *testing.T, lb, a, b *crashRig, email, password string) {
	for round := range 5 {
		var pair struct {
			RefreshToken string `json:"refresh_token"`
		}
		json.Unmarshal(lb.must("POST", "/v1/auth/login", "", "application/json",
			mustJSON(t, map[string]string{"email": email, "password": password}), http.StatusOK), &pair)
		body := mustJSON(t, map[string]string{"refresh_token": pair.RefreshToken})
		start := make(chan struct{})
		statuses := make([]int, 2)
		codes := make([]string, 2)
		var wg sync.WaitGroup
		for i, node := range []*crashRig{a, b} {
			wg.Go(func() {
				<-start
				status, resp, _ := node.send("POST", "/v1/auth/refresh", "", "application/json", body, nil)
				var problem struct {
					Code string `json:"code"`
				}
				json.Unmarshal(resp, &problem)
				statuses[i], codes[i] = status, problem.Code
			})
		}
		close(start)
		wg.Wait()
		slices.Sort(statuses)
		if statuses[0] != http.StatusOK || statuses[1] != http.StatusUnauthorized || !slices.Contains(codes, "error.auth.session_expired") {
			t.Fatalf("round %d: one refresh token on both nodes answered %v %v, want one 200 and one 401 error.auth.session_expired", round, statuses, codes)
		}
	}
}

// twoNodeWriter is an account's writes through the nodes, and the ledger of
// what the nodes acknowledged.
type twoNodeWriter struct {
	t                                 *testing.T
	lb                                *crashRig
	token, userID, album, upload, pin string
	ciphertext, original              string

	mu    sync.Mutex
	blobs map[string][]byte // every blob the account holds, by hash
	ops   []crashOp         // every acknowledged op
	// unanswered are the ops sent to a node that died before it answered:
	// each may have been applied or not, as a client cannot tell, so
	// resendUnanswered sends them again, as a client would.
	unanswered []sentOp
}

// sentOp is an op's request body and the two blobs it stores.
type sentOp struct{ body, manifest, metadata []byte }

func newTwoNodeWriter(t *testing.T, lb *crashRig, token string) *twoNodeWriter {
	w := &twoNodeWriter{t: t, lb: lb, token: token, blobs: map[string][]byte{}}
	var p struct {
		UserID string `json:"user_id"`
	}
	json.Unmarshal(lb.must("GET", "/v1/auth/profile", token, "", nil, http.StatusOK), &p)
	w.userID = p.UserID
	w.album = randomUUID(lb.rng)
	var pin struct {
		ProtocolVersion string `json:"protocol_version"`
	}
	json.Unmarshal(lb.must("POST", "/v1/albums", token, "application/json", mustJSON(t, map[string]string{"album_id": w.album}), http.StatusCreated), &pin)
	w.pin = pin.ProtocolVersion
	var up struct {
		UploadID string `json:"upload_id"`
	}
	json.Unmarshal(lb.must("POST", "/v1/albums/"+w.album+"/uploads", token, "", nil, http.StatusCreated), &up)
	w.upload = up.UploadID
	for _, role := range []*string{&w.ciphertext, &w.original} {
		data := make([]byte, 4096)
		fillRandom(lb.rng, data)
		lb.must("PUT", "/v1/uploads/"+w.upload+"/blobs/"+hashHex(data), token, "application/octet-stream", data, http.StatusCreated)
		*role = hashHex(data)
		w.held(data)
	}
	if t.Failed() {
		t.FailNow()
	}
	return w
}

func (w *twoNodeWriter) held(data []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.blobs[hashHex(data)] = data
}

func (w *twoNodeWriter) acknowledged() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ops)
}

func (w *twoNodeWriter) heldBytes() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var n int64
	for _, b := range w.blobs {
		n += int64(len(b))
	}
	return n
}

// opBody is a lifecycle op on asset: a create, or with prior a replace.
func (w *twoNodeWriter) opBody(asset, prior string) (body, manifest, metadata []byte) {
	w.mu.Lock()
	manifest, metadata = make([]byte, 300), make([]byte, 200)
	fillRandom(w.lb.rng, manifest)
	fillRandom(w.lb.rng, metadata)
	device := randomUUID(w.lb.rng)
	w.mu.Unlock()
	env := map[string]any{
		"crypto_suite_id": 1, "protocol_version": w.pin, "album_id": w.album, "file_id": asset,
		"amk_version": 0, "ciphertext_hash": w.ciphertext, "plaintext_size": 4096, "chunk_size": 65536,
		"key_mode": "derived", "metadata_blob_hash": hashHex(metadata), "created_by_user": w.userID,
		"created_by_device": device, "client_version": "two-nodes/1", "timestamp": "2026-11-25T10:00:00Z",
		"action": "create",
	}
	if prior != "" {
		env["action"], env["prior_provenance_hash"], env["original_blob_hash"] = "replace", prior, w.original
	}
	body = mustJSON(w.t, map[string]any{
		"manifest_envelope": env,
		"manifest_cbor":     base64.StdEncoding.EncodeToString(manifest),
		"metadata_blob":     base64.StdEncoding.EncodeToString(metadata),
	})
	return body, manifest, metadata
}

// applyOp sends an op to node and records it when the node acknowledges
// it (200); it returns the status and the problem's code, and status 0
// when no answer arrived.
func (w *twoNodeWriter) applyOp(node *crashRig, asset, prior string) (status int, code string, manifest []byte) {
	body, manifest, metadata := w.opBody(asset, prior)
	status, code = w.sendOp(node, sentOp{body, manifest, metadata})
	return status, code, manifest
}

// sendOp sends op to node and records it when it is answered 200. An op
// the node did not answer is kept in unanswered.
func (w *twoNodeWriter) sendOp(node *crashRig, op sentOp) (status int, code string) {
	status, resp, ok := node.send("POST", "/v1/albums/"+w.album+"/ops", w.token, "application/json", op.body, nil)
	if !ok {
		w.mu.Lock()
		w.unanswered = append(w.unanswered, op)
		w.mu.Unlock()
		return 0, ""
	}
	var res struct {
		SyncSeq float64 `json:"sync_seq"`
		Code    string  `json:"code"`
	}
	json.Unmarshal(resp, &res)
	if status == http.StatusOK {
		w.mu.Lock()
		w.ops = append(w.ops, crashOp{album: w.album, manifestHash: hashHex(op.manifest), syncSeq: res.SyncSeq, manifest: op.manifest})
		w.blobs[hashHex(op.manifest)], w.blobs[hashHex(op.metadata)] = op.manifest, op.metadata
		w.mu.Unlock()
	}
	return status, res.Code
}

// resendUnanswered sends every op no node answered to node, which must
// answer 200: applied now, or replayed when the dead node had applied it
// before it died.
func (w *twoNodeWriter) resendUnanswered(node *crashRig) {
	w.mu.Lock()
	ops := w.unanswered
	w.unanswered = nil
	w.mu.Unlock()
	for _, op := range ops {
		if status, code := w.sendOp(node, op); status != http.StatusOK {
			w.t.Errorf("an unanswered op sent again to %s: %d %s", node.url, status, code)
		}
	}
}

// createAsset creates a new asset on node; an answer other than 200 from a
// live node fails the test.
func (w *twoNodeWriter) createAsset(node *crashRig) {
	w.mu.Lock()
	asset := randomUUID(w.lb.rng)
	w.mu.Unlock()
	if status, code, _ := w.applyOp(node, asset, ""); status != 0 && status != http.StatusOK {
		w.t.Errorf("create on %s: %d %s", node.url, status, code)
	}
}

// replaceOnceAcrossNodes: rounds of eight replaces of one chain head sent
// to both nodes at once; each round exactly one applies and the rest are
// stale.
func replaceOnceAcrossNodes(t *testing.T, w *twoNodeWriter, a, b *crashRig) {
	asset := randomUUID(w.lb.rng)
	status, code, manifest := w.applyOp(w.lb, asset, "")
	if status != http.StatusOK {
		t.Fatalf("create: %d %s", status, code)
	}
	head := hashHex(manifest)
	for round := range 4 {
		type result struct {
			status   int
			code     string
			manifest []byte
		}
		results := make([]result, 8)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range results {
			wg.Go(func() {
				<-start
				s, c, m := w.applyOp([]*crashRig{a, b}[i%2], asset, head)
				results[i] = result{s, c, m}
			})
		}
		close(start)
		wg.Wait()
		applied := 0
		for _, r := range results {
			switch {
			case r.status == http.StatusOK:
				applied++
				head = hashHex(r.manifest)
			case r.status != http.StatusConflict || r.code != "error.op.stale_chain":
				t.Fatalf("round %d: a replace answered %d %s", round, r.status, r.code)
			}
		}
		if applied != 1 {
			t.Fatalf("round %d: %d of 8 replaces of one head applied, want exactly 1", round, applied)
		}
	}
}

// createTransfer opens a tus transfer for data and returns its path.
func (w *twoNodeWriter) createTransfer(data []byte) string {
	status, h, body, _ := call(w.lb, "POST", "/v1/uploads/"+w.upload+"/tus", w.token, nil, map[string]string{
		"Tus-Resumable": "1.0.0", "Upload-Length": strconv.Itoa(len(data)),
		"Upload-Metadata": "hash " + base64.StdEncoding.EncodeToString([]byte(hashHex(data))),
	})
	if status != http.StatusCreated {
		w.t.Fatalf("create a transfer: %d %s", status, body)
	}
	loc, err := url.Parse(h.Get("Location"))
	if err != nil {
		w.t.Fatal(err)
	}
	return loc.Path
}

// share registers a link serving data's blob and returns its id.
func (w *twoNodeWriter) share(serves ...[]byte) string {
	w.mu.Lock()
	link := fmt.Sprintf("%016x%016x", w.lb.rng.Uint64(), w.lb.rng.Uint64())
	w.mu.Unlock()
	var hashes []string
	for _, d := range serves {
		hashes = append(hashes, hashHex(d))
	}
	w.lb.must("POST", "/v1/shares", w.token, "application/json",
		mustJSON(w.t, map[string]any{"opaque_id": link, "metadata_hash": hashes[0], "serves": hashes}), http.StatusCreated)
	return link
}

// verify reads back every acknowledged write through w.lb: the album's
// feed holds each op at the sync_seq it was given, its sync_seqs run from
// 1 with no gap, and every held blob is served byte for byte.
func (w *twoNodeWriter) verify() {
	t := w.t
	var feed struct {
		Entries []struct {
			SyncSeq      float64 `json:"sync_seq"`
			ManifestHash string  `json:"manifest_hash"`
		} `json:"entries"`
	}
	json.Unmarshal(w.lb.must("GET", "/v1/albums/"+w.album+"/feed?limit=5000", w.token, "", nil, http.StatusOK), &feed)
	bySeq := map[float64]string{}
	for i, e := range feed.Entries {
		if e.SyncSeq != float64(i+1) {
			t.Fatalf("feed entry %d has sync_seq %v: a gap", i, e.SyncSeq)
		}
		bySeq[e.SyncSeq] = e.ManifestHash
	}
	for _, op := range w.ops {
		if got := bySeq[op.syncSeq]; got != op.manifestHash {
			t.Errorf("acknowledged op at sync_seq %v: the feed has %q, want %s", op.syncSeq, got, op.manifestHash)
		}
	}
	var all [][]byte
	for _, b := range w.blobs {
		all = append(all, b)
	}
	for i := 0; i < len(all); i += 100 {
		batch := all[i:min(i+100, len(all))]
		link := w.share(batch...)
		for _, data := range batch {
			if got := w.lb.must("GET", "/s/"+link+"/blob/"+hashHex(data), "", "", nil, http.StatusOK); !bytes.Equal(got, data) {
				t.Errorf("blob %s is not served byte for byte", hashHex(data))
			}
		}
	}
}

// tusOffset asks node for the transfer's offset.
func tusOffset(t *testing.T, node *crashRig, loc, token string) int {
	status, h, _, _ := call(node, "HEAD", loc, token, nil, tusHeaders(-1))
	off, err := strconv.Atoi(h.Get("Upload-Offset"))
	if status != http.StatusOK || err != nil {
		t.Fatalf("HEAD %s on %s: %d, offset %q", loc, node.url, status, h.Get("Upload-Offset"))
	}
	return off
}
