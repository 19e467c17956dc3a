package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"sealbox/server"
	"sealbox/server/password"
	"sealbox/server/servertest"
)

// TestShareLinksInABrowser reads a share link from a page in a real browser
// (Debian's chromium, headless) served from another origin, as a viewer
// without an account would: the link's metadata, a 64 KiB range and the
// whole 16 MiB blob through the share listener, hashed with WebCrypto
// against the content address; a conditional re-read with the ETag (a 304,
// and a preflight, since If-None-Match is not CORS-safelisted); after the
// owner revokes the link, the page's next read is a 404 it can see, also
// for the small blob it had read (and cached) just before, so no cached copy
// outlives the link; the API is refused to the page's origin without
// --cors-origin and answers it with.
//
// The page reports each phase to its own server (see testdata/browser/share.js),
// which hands the report to the test and answers once the test has acted.
func TestShareLinksInABrowser(t *testing.T) {
	chromium := findChromium(t)
	s := browserServe(t, t.TempDir(), nil)
	api, stop := runServeOf(t, s)
	t.Cleanup(stop)
	owner := newBrowserOwner(t, api)
	big, small := make([]byte, 16<<20), make([]byte, 1000)
	rng := rand.NewChaCha8([32]byte{'b', 'r', 'o', 'w', 's', 'e', 'r'})
	rng.Read(big)
	rng.Read(small)
	meta := []byte("sealed metadata")
	const link = "b10e5ad0b10e5ad0b10e5ad0b10e5ad0"
	owner.share(link, meta, big, small)
	const rangeStart, rangeLen = 5 << 20, 64 << 10

	config := map[string]any{
		"api": api, "shares": "http://" + s.ShareListen, "link": link, "token": owner.token,
		"big": hashHex(big), "small": hashHex(small), "range": fmt.Sprintf("bytes=%d-%d", rangeStart, rangeStart+rangeLen-1),
	}
	// json.Marshal escapes <, > and &: the JSON is safe inside a script element.
	raw, _ := json.Marshal(config)
	phases, next := make(chan pageReport), make(chan any)
	page := httptest.NewServer(pageHandler(t, raw, phases, next))
	defer page.Close()
	browse(t, chromium, page.URL+"/")

	// Live: every read as the link serves it, the API refused.
	seen := awaitPhase(t, phases, "live")
	var metadata struct {
		MetadataHash string `json:"metadata_hash"`
	}
	json.Unmarshal([]byte(seen["metadata"].Text), &metadata)
	if seen["metadata"].Status != 200 || metadata.MetadataHash != hashHex(meta) {
		t.Errorf("metadata: %+v", seen["metadata"])
	}
	rg := seen["range"]
	if rg.Status != 206 || rg.Length != rangeLen || rg.SHA256 != hashHex(big[rangeStart:rangeStart+rangeLen]) ||
		rg.ContentRange != fmt.Sprintf("bytes %d-%d/%d", rangeStart, rangeStart+rangeLen-1, len(big)) || rg.ContentLength != fmt.Sprint(rangeLen) {
		t.Errorf("64 KiB range: %+v", rg)
	}
	whole := seen["whole"]
	if whole.Status != 200 || whole.Length != len(big) || whole.SHA256 != hashHex(big) || whole.ETag != `"`+hashHex(big)+`"` ||
		whole.AcceptRanges != "bytes" || whole.LastModified == "" {
		t.Errorf("whole 16 MiB blob: %+v", whole)
	}
	if seen["revalidated"].Status != 304 {
		t.Errorf("conditional re-read with the ETag: %+v", seen["revalidated"])
	}
	// Validation only: a cache may keep the blob, but must ask sealbox
	// before every use, and sealbox answers 404 once the link is revoked.
	if sm := seen["small"]; sm.Status != 200 || sm.SHA256 != hashHex(small) || sm.CacheControl != "private, no-cache" {
		t.Errorf("small blob: %+v", sm)
	}
	if a := seen["api"]; a.Error == "" {
		t.Errorf("the API answered a page of another origin without --cors-origin: %+v", a)
	}
	owner.revoke(link)
	next <- struct{}{}

	// Revoked: the page sees 404, the cached small blob included.
	seen = awaitPhase(t, phases, "revoked")
	for _, name := range []string{"small", "metadata"} {
		if r := seen[name]; r.Status != 404 || !strings.Contains(r.Text, "error.share.not_found") {
			t.Errorf("%s after the revocation: %+v", name, r)
		}
	}
	stop()
	s = browserServe(t, s.Data, []string{page.URL})
	api, stop = runServeOf(t, s)
	t.Cleanup(stop)
	next <- map[string]any{"api": api}

	// With --cors-origin naming the page's origin, the API answers it.
	seen = awaitPhase(t, phases, "api")
	if a := seen["api"]; a.Status != 200 || !strings.Contains(a.Text, owner.album) {
		t.Errorf("the API from the page's origin with --cors-origin: %+v", a)
	}
	next <- struct{}{}
}

// findChromium is the path of Debian's chromium. Without it the test
// skips, except in CI (CI=true), where it fails: .ci/run installs it.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is needed for the browser test (Debian: chromium; .ci/run installs it)")
	}
	t.Skip("chromium is not installed (Debian: chromium)")
	return ""
}

// browse runs headless chromium on url until the test ends. Its profile
// (and HTTP cache) is the test's own; as root it cannot sandbox itself; it
// keeps shared memory in /tmp, since a container's /dev/shm is often 64 MiB.
func browse(t *testing.T, chromium, url string) {
	t.Helper()
	args := []string{"--headless", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
		"--disable-extensions", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), url}
	if os.Geteuid() == 0 {
		args = append([]string{"--no-sandbox"}, args...)
	}
	cmd := exec.Command(chromium, args...)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Its own process group, so the renderer and helper processes end with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if t.Failed() {
			t.Logf("chromium's output:\n%s", tail(out.String(), 30))
		}
	})
}

// pageReport is what the page saw of each read (see read in share.js).
type pageReport map[string]pageRead

type pageRead struct {
	Status        int    `json:"status"`
	Length        int    `json:"length"`
	SHA256        string `json:"sha256"`
	ETag          string `json:"etag"`
	ContentRange  string `json:"contentRange"`
	ContentLength string `json:"contentLength"`
	AcceptRanges  string `json:"acceptRanges"`
	CacheControl  string `json:"cacheControl"`
	LastModified  string `json:"lastModified"`
	Text          string `json:"text"`
	Error         string `json:"error"`
}

// pageHandler serves the page, which starts with config (JSON), and takes
// its reports: each goes to phases with its phase's name, and is answered
// with what next then gives.
func pageHandler(t *testing.T, config []byte, phases chan<- pageReport, next <-chan any) http.Handler {
	script, err := os.ReadFile(filepath.Join("testdata", "browser", "share.js"))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<!doctype html><title>share</title><script type=\"application/json\" id=\"config\">%s</script><script>%s</script>",
			config, script)
	})
	mux.HandleFunc("POST /report/{phase}", func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var seen map[string]json.RawMessage
		json.Unmarshal(raw, &seen)
		rep := pageReport{"phase": {Text: r.PathValue("phase")}}
		for k, v := range seen {
			var pr pageRead
			if json.Unmarshal(v, &pr) == nil {
				rep[k] = pr
			}
		}
		rep["raw"] = pageRead{Text: string(raw)}
		select {
		case phases <- rep:
		case <-r.Context().Done():
			return
		}
		var answer any
		select {
		case answer = <-next:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(answer)
	})
	return mux
}

// awaitPhase waits for the page's report of phase.
func awaitPhase(t *testing.T, phases <-chan pageReport, phase string) pageReport {
	t.Helper()
	select {
	case rep := <-phases:
		if got := rep["phase"].Text; got != phase {
			t.Fatalf("the page reported %q, want %q: %s", got, phase, rep["raw"].Text)
		}
		t.Logf("%s: %.2000s", phase, rep["raw"].Text)
		return rep
	case <-time.After(90 * time.Second):
		t.Fatalf("no report of %q from the page within 90s", phase)
		return nil
	}
}

// browserServe is serve on data with a share listener, cheap password
// hashing and the API open to origins.
func browserServe(t *testing.T, data string, origins []string) *Serve {
	cfg := server.DefaultConfig()
	cfg.Argon2 = password.Params{Time: 1, MemoryKiB: 64, Threads: 1}
	cfg.CORSOrigins = origins
	return &Serve{Location: Location{Data: data}, Listen: "127.0.0.1:0", ShareListen: freeAddr(t), Config: cfg}
}

// browserOwner is an account that shares blobs, driven over the API.
type browserOwner struct {
	t            *testing.T
	api          string
	token, album string
	upload       string
}

func newBrowserOwner(t *testing.T, api string) *browserOwner {
	o := &browserOwner{t: t, api: api, album: "4e1c2b9e-3d4a-4e5f-8a7b-1c2d3e4f5a6b"}
	var reg struct {
		AccessToken string `json:"access_token"`
	}
	o.call("POST", "/v1/auth/register", `{"email":"browser@example.org","password":"correct horse battery"}`, 200, &reg)
	o.token = reg.AccessToken
	o.call("POST", "/v1/albums", `{"album_id":"`+o.album+`"}`, 201, nil)
	var up struct {
		UploadID string `json:"upload_id"`
	}
	o.call("POST", "/v1/albums/"+o.album+"/uploads", "", 201, &up)
	o.upload = up.UploadID
	return o
}

// share uploads the blobs and registers link serving them, metadata first.
func (o *browserOwner) share(link string, blobs ...[]byte) {
	var serves []string
	for _, b := range blobs {
		o.call("PUT", "/v1/uploads/"+o.upload+"/blobs/"+hashHex(b), b, 201, nil)
		serves = append(serves, hashHex(b))
	}
	body, _ := json.Marshal(map[string]any{"opaque_id": link, "metadata_hash": serves[0], "serves": serves})
	o.call("POST", "/v1/shares", string(body), 201, nil)
}

func (o *browserOwner) revoke(link string) { o.call("DELETE", "/v1/shares/"+link, "", 204, nil) }

// call sends body (a string as JSON, []byte as a blob) and decodes the
// answer into out.
func (o *browserOwner) call(method, path string, body any, want int, out any) {
	o.t.Helper()
	req := servertest.Req{Method: method, Path: path, Token: o.token}
	switch b := body.(type) {
	case string:
		if b != "" {
			req.Body, req.ContentType = b, "application/json"
		}
	case []byte:
		req.Body, req.ContentType = b, "application/octet-stream"
	}
	r := servertest.Client{BaseURL: o.api}.Do(o.t, req)
	if r.Status != want {
		o.t.Fatalf("%s %s: %d, want %d: %.300s", method, path, r.Status, want, r.Body)
	}
	if out != nil {
		if err := json.Unmarshal(r.Body, out); err != nil {
			o.t.Fatalf("%s %s: %v: %.300s", method, path, err, r.Body)
		}
	}
}
