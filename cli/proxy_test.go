package cli

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sealbox/server/servertest"
	"sealbox/server/sharepage"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestREADMENginxInFront: the README's nginx block, run by a real nginx in
// front of the real binary, keeps resumable uploads and ranged reads
// working. Its only changes: the listen address and certificate paths
// (a test certificate on a free port) and sealbox's address. A 64 MiB tus
// upload is cut off halfway through nginx and resumed from the offset
// sealbox acknowledged: with request buffering on, nginx would have
// forwarded nothing of the cut request, so that offset is the proof that
// bodies stream. Then the blob is read back whole and by range through it.
func TestREADMENginxInFront(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nginx and the binary")
	}
	bin, dir := buildBinary(t), t.TempDir()
	sealboxAddr := freeAddr(t)
	startProcess(t, serveEnv(), "sealbox listening", bin, "serve", "--data", dir, "--listen", sealboxAddr, "--trust-proxy")
	client, base := runREADMENginx(t, 0, "photos.example.org", "127.0.0.1:8080", sealboxAddr)
	api := proxyAPI{t: t, client: client, base: base}

	token := api.json("POST", "/v1/auth/register", "", `{"email":"proxy@example.org","password":"correct horse battery"}`, 200)["access_token"].(string)
	const album = "3f2a9c1e-8b7d-4e6f-9a0b-1c2d3e4f5a6b"
	api.json("POST", "/v1/albums", token, `{"album_id":"`+album+`"}`, 201)
	upload := api.json("POST", "/v1/albums/"+album+"/uploads", token, "", 201)["upload_id"].(string)

	video := make([]byte, 64<<20)
	rng := rand.NewChaCha8([32]byte{'n', 'g', 'i', 'n', 'x'})
	rng.Read(video)
	sum := sha256.Sum256(video)
	hash := hex.EncodeToString(sum[:])
	resp := api.do("POST", "/v1/uploads/"+upload+"/tus", token, nil, map[string]string{
		"Tus-Resumable": "1.0.0", "Upload-Length": strconv.Itoa(len(video)),
		"Upload-Metadata": "hash " + base64.StdEncoding.EncodeToString([]byte(hash)),
	}, 201)
	transfer := base + resp.Header.Get("Location")

	// Half the body, then the connection drops.
	half := len(video) / 2
	cut := &cutReader{data: video, at: half}
	req, _ := http.NewRequest("PATCH", transfer, cut)
	req.ContentLength = int64(len(video))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Tus-Resumable", "1.0.0")
	req.Header.Set("Content-Type", "application/offset+octet-stream")
	req.Header.Set("Upload-Offset", "0")
	if resp, err := client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the cut PATCH was answered %d", resp.StatusCode)
	}

	// Ask where to resume until sealbox has seen the cut (it answers 423
	// to a PATCH while the old request still writes).
	var offset int
	waitFor(t, "an acknowledged offset after the cut", func() bool {
		resp := api.do("HEAD", strings.TrimPrefix(transfer, base), token, nil, map[string]string{"Tus-Resumable": "1.0.0"}, 200)
		offset, _ = strconv.Atoi(resp.Header.Get("Upload-Offset"))
		return offset > 0
	})
	if offset > half {
		t.Fatalf("offset %d is past the %d bytes sent", offset, half)
	}
	var done *http.Response
	waitFor(t, "the resumed PATCH", func() bool {
		req, _ := http.NewRequest("PATCH", transfer, bytes.NewReader(video[offset:]))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Tus-Resumable", "1.0.0")
		req.Header.Set("Content-Type", "application/offset+octet-stream")
		req.Header.Set("Upload-Offset", strconv.Itoa(offset))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusLocked {
			return false
		}
		done = resp
		return true
	})
	if done.StatusCode != 204 || done.Header.Get("Upload-Offset") != strconv.Itoa(len(video)) {
		t.Fatalf("the resumed PATCH: %d, Upload-Offset %q", done.StatusCode, done.Header.Get("Upload-Offset"))
	}
	t.Logf("cut after %d bytes sent; sealbox had acknowledged %d through nginx", half, offset)

	const link = "0123456789abcdef0123456789abcdef"
	api.json("POST", "/v1/shares", token, `{"opaque_id":"`+link+`","metadata_hash":"`+hash+`","serves":["`+hash+`"]}`, 201)
	whole := api.do("GET", "/s/"+link+"/blob/"+hash, "", nil, nil, 200)
	if got := whole.Body; !bytes.Equal(got, video) {
		t.Fatalf("the blob read back through nginx differs (%d bytes)", len(got))
	}
	ranged := api.do("GET", "/s/"+link+"/blob/"+hash, "", nil, map[string]string{"Range": "bytes=40000000-40065535"}, 206)
	if !bytes.Equal(ranged.Body, video[40000000:40065536]) || ranged.Header.Get("Content-Range") != fmt.Sprintf("bytes 40000000-40065535/%d", len(video)) {
		t.Fatalf("ranged read through nginx: %d bytes, Content-Range %q", len(ranged.Body), ranged.Header.Get("Content-Range"))
	}
	api.wantSharePage(link)
}

// wantSharePage fails unless the share page of link, and every file it
// loads, come through nginx as sealbox serves them.
func (a proxyAPI) wantSharePage(link string) {
	a.t.Helper()
	page := a.do("GET", "/s/"+link, "", nil, map[string]string{"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}, 200)
	if !bytes.Equal(page.Body, sharepage.Page()) || !strings.Contains(page.Header.Get("Content-Security-Policy"), "script-src 'self'") ||
		page.Header.Get("Vary") != "Accept" {
		a.t.Fatalf("the share page through nginx: %v\n%.200s", page.Header, page.Body)
	}
	for _, f := range sharepage.Files() {
		r := a.do("GET", sharepage.Prefix+f.Name, "", nil, nil, 200)
		if !bytes.Equal(r.Body, f.Body) || r.Header.Get("Content-Type") != f.ContentType {
			a.t.Errorf("%s through nginx: %s, %d bytes", f.Name, r.Header.Get("Content-Type"), len(r.Body))
		}
	}
}

// cutReader yields data up to at, then fails, as a dropped connection does.
type cutReader struct {
	data []byte
	at   int
	pos  int
}

func (r *cutReader) Read(p []byte) (int, error) {
	if r.pos >= r.at {
		return 0, fmt.Errorf("connection dropped")
	}
	n := copy(p, r.data[r.pos:r.at])
	r.pos += n
	return n, nil
}

// proxyAPI drives sealbox through the proxy.
type proxyAPI struct {
	t      *testing.T
	client *http.Client
	base   string
}

// do sends body (none when empty) with the headers and fails the test
// unless the answer has the status want.
func (a proxyAPI) do(method, path, token string, body []byte, headers map[string]string, want int) *servertest.Response {
	a.t.Helper()
	req := servertest.Req{Method: method, Path: path, Token: token, Header: headers}
	if len(body) > 0 {
		req.Body = body
	}
	r := servertest.Client{BaseURL: a.base, HTTP: a.client}.Do(a.t, req)
	if r.Status != want {
		a.t.Fatalf("%s %s through nginx: %d, want %d: %.300s", method, path, r.Status, want, r.Body)
	}
	return r
}

func (a proxyAPI) json(method, path, token, body string, want int) map[string]any {
	a.t.Helper()
	headers := map[string]string{}
	if body != "" {
		headers["Content-Type"] = "application/json"
	}
	var m map[string]any
	json.Unmarshal(a.do(method, path, token, []byte(body), headers, want).Body, &m)
	return m
}

// runREADMENginx runs the README's nginx block number i (in order) with a
// real nginx until the test ends. Its only changes: the listen address and
// the certificate paths of domain (a test certificate on a free port), and
// upstream, the address the block proxies to, for the one given. It returns
// a client trusting the certificate, speaking HTTP/1.1 as a tus client on a
// phone does, and the proxy's base URL, once nginx answers /healthz.
func runREADMENginx(t *testing.T, i int, domain, upstream, to string) (*http.Client, string) {
	t.Helper()
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		nginx = "/usr/sbin/nginx"
		if _, serr := os.Stat(nginx); serr != nil {
			if os.Getenv("CI") == "true" {
				t.Fatal("nginx is needed to test the README's proxy blocks (Debian: nginx-light; .ci/run installs it)")
			}
			t.Skip("nginx is not installed (Debian: nginx-light)")
		}
	}
	blocks, err := readmeBlocks("../README.md", "nginx")
	if err != nil || len(blocks) != 2 {
		t.Fatalf("want two nginx blocks in the README (the proxy, the share listener): %d, %v", len(blocks), err)
	}
	server := strings.Join(blocks[i].lines, "\n")

	work := t.TempDir()
	proxyAddr := freeAddr(t)
	ca := newTestCA(t)
	certFile, keyFile := filepath.Join(work, "cert.pem"), filepath.Join(work, "key.pem")
	ca.issue(t, 1, certFile, keyFile)
	replaced := strings.NewReplacer(
		"listen 443 ", "listen "+proxyAddr+" ",
		"/etc/letsencrypt/live/"+domain+"/fullchain.pem", certFile,
		"/etc/letsencrypt/live/"+domain+"/privkey.pem", keyFile,
		upstream, to,
	).Replace(server)
	for _, want := range []string{proxyAddr, certFile, keyFile, to} {
		if !strings.Contains(replaced, want) {
			t.Fatalf("the README's nginx block no longer has the line that %s replaces:\n%s", want, server)
		}
	}
	// The main configuration around the README's server block: in the
	// foreground, every path in the temp dir, workers as the test's user.
	conf := fmt.Sprintf(`daemon off;
master_process on;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
%[2]s
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path %[1]s/client_body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
%[3]s
}
`, work, map[bool]string{true: "user root;", false: ""}[os.Geteuid() == 0], replaced)
	confFile := filepath.Join(work, "nginx.conf")
	writeFile(t, confFile, []byte(conf))
	if out, err := exec.Command(nginx, "-t", "-c", confFile, "-p", work).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
	startProcess(t, os.Environ(), "", nginx, "-c", confFile, "-p", work)

	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	// HTTP/1.1 to nginx, as a tus client on a phone speaks it.
	client := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots},
		TLSNextProto:    map[string]func(string, *tls.Conn) http.RoundTripper{},
	}}
	base := "https://" + proxyAddr
	waitFor(t, "nginx answering", func() bool {
		resp, err := client.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return client, base
}

// TestREADMENginxShareListener: the README's second nginx block, in front
// of --share-listen, passes share reads through with their cross-origin
// headers (a range included) and leaves everything else to the share
// listener's 404.
func TestREADMENginxShareListener(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nginx")
	}
	s := browserServe(t, t.TempDir(), nil)
	s.Config.TrustProxy = true
	apiURL, stop := runServeOf(t, s)
	t.Cleanup(stop)
	owner := newBrowserOwner(t, apiURL)
	blob := bytes.Repeat([]byte("shared through nginx;"), 10000)
	const link = "5a1e5a1e5a1e5a1e5a1e5a1e5a1e5a1e"
	owner.share(link, blob)
	client, base := runREADMENginx(t, 1, "share.example.org", "127.0.0.1:8081", s.ShareListen)
	api := proxyAPI{t: t, client: client, base: base}

	meta := api.do("GET", "/s/"+link, "", nil, map[string]string{"Origin": "https://viewer.example"}, 200)
	ranged := api.do("GET", "/s/"+link+"/blob/"+hashHex(blob), "", nil, map[string]string{"Range": "bytes=100-199"}, 206)
	if !bytes.Equal(ranged.Body, blob[100:200]) {
		t.Fatalf("ranged read through nginx: %q", ranged.Body)
	}
	for _, r := range []*servertest.Response{meta, ranged} {
		if r.Header.Get("Access-Control-Allow-Origin") != "*" || r.Header.Get("Cross-Origin-Resource-Policy") != "cross-origin" {
			t.Errorf("share answer through nginx without its CORS headers: %v", r.Header)
		}
	}
	api.wantSharePage(link)
	api.do("GET", "/healthz", "", nil, nil, 200)
	for _, path := range []string{"/readyz", "/v1/version", "/v1/albums"} {
		if r := api.do("GET", path, owner.token, nil, nil, 404); !strings.Contains(string(r.Body), `"error.not_found"`) {
			t.Errorf("%s through nginx: %s", path, r.Body)
		}
	}
}
