package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"sealbox/server/servertest"
	"sealbox/server/sharepage"
)

// browserAccept is what Chromium sends when it opens a link.
const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8"

// pagePolicy is the share page's Content-Security-Policy, as the issue of
// the page asks for it: nothing but its own scripts and styles, decrypted
// images and video, its own origin, no framing.
const pagePolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src blob:; media-src 'self' blob:; " +
	"connect-src 'self'; worker-src 'self'; frame-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// withoutVolatile is a response's headers without those that differ from
// one request to the next.
func withoutVolatile(h http.Header) http.Header {
	out := maps.Clone(h)
	delete(out, "Date")
	delete(out, "X-Request-Id")
	return out
}

// TestSharePageNegotiation: GET /s/ID asking for HTML (a browser opening
// the link) gets the page, the same bytes for a live, a revoked and an
// unknown link, with the page's own headers; every other Accept (none,
// */*, JSON, text/html at q=0) gets the JSON answer or the 404, its status,
// headers and body identical to a request without Accept.
func TestSharePageNegotiation(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "page@example.org")
	live := ts.newLink(t, tok.Access)
	revoked := ts.newLink(t, tok.Access)
	ts.Do(t, Req{Method: "DELETE", Path: "/v1/shares/" + revoked.id, Token: tok.Access}).WantStatus(t, http.StatusNoContent)
	unknown := strings.Repeat("0", 32)

	for _, id := range []string{live.id, revoked.id, unknown, "NOT-AN-ID"} {
		want := ts.Do(t, Req{Method: "GET", Path: "/s/" + id})
		for _, accept := range []string{"*/*", "application/json", "text/*", "application/json, text/plain, */*", "text/html;q=0, */*"} {
			got := ts.Do(t, Req{Method: "GET", Path: "/s/" + id, Header: map[string]string{"Accept": accept}})
			if got.Status != want.Status || string(got.Body) != string(want.Body) {
				t.Errorf("%s with Accept %q: %d %s, want %d %s", id, accept, got.Status, got.Body, want.Status, want.Body)
			}
			if g, w := withoutVolatile(got.Header), withoutVolatile(want.Header); !maps.EqualFunc(g, w, func(a, b []string) bool { return strings.Join(a, "\n") == strings.Join(b, "\n") }) {
				t.Errorf("%s with Accept %q: headers %v, want %v", id, accept, g, w)
			}
		}
		page := ts.Do(t, Req{Method: "GET", Path: "/s/" + id, Header: map[string]string{"Accept": browserAccept}}).WantStatus(t, http.StatusOK)
		if string(page.Body) != string(sharepage.Page()) {
			t.Errorf("%s: the page's body differs from sharepage.Page()", id)
		}
		for name, want := range map[string]string{
			"Content-Type":            "text/html; charset=utf-8",
			"Content-Security-Policy": pagePolicy,
			"Referrer-Policy":         "no-referrer",
			"X-Content-Type-Options":  "nosniff",
			"X-Frame-Options":         "DENY",
			"Vary":                    "Accept",
			"Cache-Control":           "no-cache",
		} {
			if got := page.Header.Values(name); len(got) != 1 || got[0] != want {
				t.Errorf("%s: the page's %s is %q, want %q", id, name, got, want)
			}
		}
	}
}

// TestSharePageFiles: every file the page loads (its scripts, their
// imports, its style sheet) is served below /share-page/ under a name that
// carries the hash of its bytes, cacheable for good; the service worker
// under its fixed name, revalidated, allowed the /s/ scope and only its
// own origin; the page has no inline script, style or handler; the page and
// its files together weigh under 60 KiB; the share listener serves them
// too.
func TestSharePageFiles(t *testing.T) {
	ts := MustOpenServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts.StartShares(ln, nil)
	html := string(sharepage.Page())
	if regexp.MustCompile(`<script(?:\s+type="module")?>|\sstyle=|\son[a-z]+=`).MatchString(html) {
		t.Errorf("the page holds an inline script, style or event handler:\n%s", html)
	}
	refs := regexp.MustCompile(`(?:src|href)="\.\./share-page/([^"]+)"`).FindAllStringSubmatch(html, -1)
	imports := regexp.MustCompile(`from "\./([^"]+)"`)
	loaded := map[string]bool{}
	weight := len(html)
	queue := []string{sharepage.ServiceWorker}
	for _, m := range refs {
		queue = append(queue, m[1])
	}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if loaded[name] {
			continue
		}
		loaded[name] = true
		for _, base := range []string{ts.URL(), ts.ShareURL()} {
			r := servertest.Client{BaseURL: base}.Do(t, Req{Method: "GET", Path: sharepage.Prefix + name}).WantStatus(t, http.StatusOK)
			wantType := "text/javascript; charset=utf-8"
			if strings.HasSuffix(name, ".css") {
				wantType = "text/css; charset=utf-8"
			}
			wantHeader(t, r, "Content-Type", wantType)
			wantHeader(t, r, "X-Content-Type-Options", "nosniff")
			if name == sharepage.ServiceWorker {
				wantHeader(t, r, "Cache-Control", "no-cache")
				wantHeader(t, r, "Service-Worker-Allowed", "/s/")
				wantHeader(t, r, "Content-Security-Policy", "default-src 'none'; script-src 'self'; connect-src 'self'")
			} else {
				wantHeader(t, r, "Cache-Control", "public, max-age=31536000, immutable")
				sum := sha256.Sum256(r.Body)
				if !strings.Contains(name, "-"+hex.EncodeToString(sum[:6])+".") {
					t.Errorf("%s does not carry the hash of its bytes (%x)", name, sum[:6])
				}
			}
			if base == ts.URL() {
				weight += len(r.Body)
				for _, m := range imports.FindAllStringSubmatch(string(r.Body), -1) {
					queue = append(queue, m[1])
				}
			}
		}
	}
	if len(loaded) != len(sharepage.Files()) {
		t.Errorf("the page loads %d files, the package holds %d", len(loaded), len(sharepage.Files()))
	}
	if weight >= 60<<10 {
		t.Errorf("the page weighs %d bytes, want under 60 KiB", weight)
	}
	t.Logf("page weight: %d bytes (HTML, scripts, style sheet and service worker, uncompressed)", weight)
	ts.Do(t, Req{Method: "GET", Path: sharepage.Prefix + "app.js"}).WantProblem(t, http.StatusNotFound, "error.not_found")
	page := servertest.Client{BaseURL: ts.ShareURL()}.Do(t, Req{Method: "GET", Path: "/s/" + strings.Repeat("0", 32), Header: map[string]string{"Accept": browserAccept}})
	page.WantStatus(t, http.StatusOK)
	wantHeader(t, page, "Content-Security-Policy", pagePolicy)
}
