package server_test

import (
	"net"
	"net/http"
	"strings"
	"testing"

	"sealbox/server"
	"sealbox/server/servertest"
)

// wantShareCORS fails unless r carries the headers every /s/ answer must:
// readable by any origin, never with credentials, the exposed headers a
// page needs, embeddable cross-origin, sandboxed and not sniffed.
func wantShareCORS(tb testing.TB, r *Response) {
	tb.Helper()
	h := r.Header
	for name, want := range map[string]string{
		"Access-Control-Allow-Origin":   "*",
		"Access-Control-Expose-Headers": "Content-Range, Accept-Ranges, Content-Length, ETag, Last-Modified, Retry-After",
		"Cross-Origin-Resource-Policy":  "cross-origin",
		"X-Content-Type-Options":        "nosniff",
		"Referrer-Policy":               "no-referrer",
	} {
		if got := h.Values(name); len(got) != 1 || got[0] != want {
			tb.Errorf("%s: got %q, want %q", name, got, want)
		}
	}
	if _, ok := h["Access-Control-Allow-Credentials"]; ok {
		tb.Errorf("Access-Control-Allow-Credentials present: %q", h.Get("Access-Control-Allow-Credentials"))
	}
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "sandbox") || !strings.Contains(csp, "default-src 'none'") {
		tb.Errorf("Content-Security-Policy: got %q, want default-src 'none' and sandbox", csp)
	}
}

// TestShareReadsAreCrossOrigin: every answer below /s/, whatever its status
// (so a page sees a revocation or a rate limit as such), lets any origin
// read it and never allows credentials; a preflight answers 204 with the
// methods and request headers a page needs; blob answers stay
// validation-only in caches.
func TestShareReadsAreCrossOrigin(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.ShareBurst = 10; c.ShareRate = 1e-3 })
	tok := ts.Register(t, "cors@example.org")
	l := ts.newLink(t, tok.Access)
	blob := "/s/" + l.id + "/blob/" + servertest.HashOf(l.content)
	etag := `"` + servertest.HashOf(l.content) + `"`
	origin := map[string]string{"Origin": "https://viewer.example"}
	with := func(kv ...string) map[string]string {
		h := map[string]string{"Origin": "https://viewer.example"}
		for i := 0; i < len(kv); i += 2 {
			h[kv[i]] = kv[i+1]
		}
		return h
	}
	cases := []servertest.Scenario{
		{Name: "metadata 200", Method: "GET", Path: "/s/" + l.id, Header: origin, WantStatus: http.StatusOK},
		{Name: "blob 200", Method: "GET", Path: blob, Header: origin, WantStatus: http.StatusOK},
		{Name: "blob 206", Method: "GET", Path: blob, Header: with("Range", "bytes=10-19"), WantStatus: http.StatusPartialContent},
		{Name: "blob 304", Method: "GET", Path: blob, Header: with("If-None-Match", etag), WantStatus: http.StatusNotModified},
		{Name: "blob HEAD 200", Method: "HEAD", Path: blob, Header: origin, WantStatus: http.StatusOK},
		{Name: "secret 200", Method: "GET", Path: "/s/" + l.id + "/wrapped-secret", Header: origin, WantStatus: http.StatusOK},
		{Name: "malformed id 400", Method: "GET", Path: "/s/NOT-AN-ID", Header: origin, WantStatus: http.StatusBadRequest},
		{Name: "unknown link 404", Method: "GET", Path: "/s/" + strings.Repeat("f", 32), Header: origin, WantStatus: http.StatusNotFound},
		{Name: "unknown blob 404", Method: "GET", Path: "/s/" + l.id + "/blob/" + strings.Repeat("e", 64), Header: origin, WantStatus: http.StatusNotFound},
		{Name: "no route 404", Method: "GET", Path: "/s/" + l.id + "/nothing/here", Header: origin, WantStatus: http.StatusNotFound},
		{Name: "wrong method 405", Method: "POST", Path: "/s/" + l.id, Header: origin, WantStatus: http.StatusMethodNotAllowed},
		{Name: "no Origin", Method: "GET", Path: "/s/" + l.id, WantStatus: http.StatusOK},
		{Name: "rate limited 429", Method: "GET", Path: blob, Header: origin, WantStatus: http.StatusTooManyRequests},
	}
	for _, sc := range cases {
		t.Run(sc.Name, func(t *testing.T) {
			if sc.WantStatus == http.StatusTooManyRequests {
				for ts.Do(t, Req{Method: "GET", Path: sc.Path}).Status != http.StatusTooManyRequests {
				}
			}
			r := sc.Test(t, ts.Client)
			wantShareCORS(t, r)
			if strings.Contains(sc.Path, "/blob/") && sc.WantStatus < 400 {
				if cc := r.Header.Get("Cache-Control"); cc != "private, no-cache" {
					t.Errorf("blob Cache-Control: got %q, want private, no-cache (validation only)", cc)
				}
			}
			if sc.WantStatus == http.StatusTooManyRequests && r.Header.Get("Retry-After") == "" {
				t.Error("429 without Retry-After")
			}
		})
	}
}

// TestSharePreflight: a preflight below /s/ (a matching path or not)
// answers 204 with exactly the CORS answer a page's conditional and range
// reads need, and spends no share-read token.
func TestSharePreflight(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.ShareBurst = 1; c.ShareRate = 1e-3 })
	for _, path := range []string{"/s/" + strings.Repeat("a", 32), "/s/" + strings.Repeat("a", 32) + "/blob/" + strings.Repeat("b", 64), "/s/x/y"} {
		r := ts.Do(t, Req{Method: "OPTIONS", Path: path, Header: map[string]string{
			"Origin": "https://viewer.example", "Access-Control-Request-Method": "GET",
			"Access-Control-Request-Headers": "if-none-match",
		}}).WantStatus(t, http.StatusNoContent)
		wantShareCORS(t, r)
		for name, want := range map[string]string{
			"Access-Control-Allow-Methods": "GET, HEAD, OPTIONS",
			"Access-Control-Allow-Headers": "Range, If-None-Match, If-Range, If-Modified-Since",
			"Access-Control-Max-Age":       "7200",
		} {
			if got := r.Header.Get(name); got != want {
				t.Errorf("%s %s: got %q, want %q", path, name, got, want)
			}
		}
		if len(r.Body) != 0 {
			t.Errorf("preflight body: %q", r.Body)
		}
	}
	// The one token of the bucket is still there.
	ts.Do(t, Req{Method: "GET", Path: "/s/" + strings.Repeat("a", 32)}).WantProblem(t, http.StatusNotFound, "error.share.not_found")
}

// TestAPICORS: the authenticated API answers no origin unless the operator
// names it; a named origin gets its own Origin echoed (with Vary: Origin on
// every API answer), Authorization allowed by preflight, and never
// credentials.
func TestAPICORS(t *testing.T) {
	const app = "https://app.example:8443"
	for _, tc := range []struct {
		name    string
		origins []string
		origin  string
		allowed bool
	}{
		{"no --cors-origin", nil, app, false},
		{"origin named", []string{"https://other.example", app}, app, true},
		{"origin not named", []string{"https://other.example"}, app, false},
		{"same host, other port", []string{"https://app.example"}, app, false},
		{"no Origin", []string{app}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := MustOpenServer(t, func(c *server.Config) { c.CORSOrigins = tc.origins })
			tok := ts.Register(t, "api-cors@example.org")
			hdr := map[string]string{}
			preflight := map[string]string{"Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "authorization"}
			if tc.origin != "" {
				hdr["Origin"] = tc.origin
				preflight["Origin"] = tc.origin
			}
			get := ts.Do(t, Req{Method: "GET", Path: "/v1/albums", Token: tok.Access, Header: hdr}).WantStatus(t, http.StatusOK)
			pre := ts.Do(t, Req{Method: "OPTIONS", Path: "/v1/albums", Header: preflight})
			unauth := ts.Do(t, Req{Method: "GET", Path: "/v1/albums", Header: hdr})
			unauth.WantProblem(t, http.StatusUnauthorized, "error.auth.unauthenticated")
			for _, r := range []*Response{get, pre, unauth} {
				if _, ok := r.Header["Access-Control-Allow-Credentials"]; ok {
					t.Error("Access-Control-Allow-Credentials present")
				}
				if got, want := r.Header.Get("Vary") == "Origin", tc.origins != nil; got != want {
					t.Errorf("Vary: got %q, want Origin: %v", r.Header.Get("Vary"), want)
				}
				if r.Header.Get("Cross-Origin-Resource-Policy") != "" {
					t.Error("API answer with Cross-Origin-Resource-Policy")
				}
			}
			if !tc.allowed {
				for _, r := range []*Response{get, pre, unauth} {
					if acao := r.Header.Get("Access-Control-Allow-Origin"); acao != "" {
						t.Errorf("Access-Control-Allow-Origin %q for an origin not named", acao)
					}
				}
				if pre.Status == http.StatusNoContent || pre.Header.Get("Access-Control-Allow-Headers") != "" {
					t.Errorf("preflight allowed: %d %v", pre.Status, pre.Header)
				}
				return
			}
			for _, r := range []*Response{get, pre, unauth} {
				if acao := r.Header.Get("Access-Control-Allow-Origin"); acao != app {
					t.Errorf("Access-Control-Allow-Origin: got %q, want %q", acao, app)
				}
			}
			pre.WantStatus(t, http.StatusNoContent)
			if ah := pre.Header.Get("Access-Control-Allow-Headers"); !strings.Contains(ah, "Authorization") {
				t.Errorf("preflight Access-Control-Allow-Headers: got %q, want Authorization among them", ah)
			}
			if am := pre.Header.Get("Access-Control-Allow-Methods"); !strings.Contains(am, "DELETE") {
				t.Errorf("preflight Access-Control-Allow-Methods: got %q", am)
			}
			if eh := unauth.Header.Get("Access-Control-Expose-Headers"); !strings.Contains(eh, "WWW-Authenticate") {
				t.Errorf("Access-Control-Expose-Headers: got %q, want WWW-Authenticate among them", eh)
			}
		})
	}
}

// TestShareListener: the share listener answers the share reads and the
// liveness probe, under the same per-address rate limit as the main
// listener, and 404 with a problem body to everything else, API,
// readiness and OpenAPI file included; its requests are counted under
// listener="share".
func TestShareListener(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.ShareBurst = 5; c.ShareRate = 1e-3 })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts.StartShares(ln, nil)
	shares := ts.ShareURL()
	tok := ts.Register(t, "listener@example.org")
	l := ts.newLink(t, tok.Access)

	servertest.Client{BaseURL: shares}.Do(t, Req{Method: "GET", Path: "/healthz"}).WantStatus(t, http.StatusOK)
	wantShareCORS(t, servertest.Client{BaseURL: shares}.Do(t, Req{Method: "GET", Path: "/s/" + l.id}).WantStatus(t, http.StatusOK))
	servertest.Client{BaseURL: shares}.Do(t, Req{Method: "GET", Path: "/s/" + l.id + "/blob/" + servertest.HashOf(l.content)}).WantStatus(t, http.StatusOK)
	servertest.Client{BaseURL: shares}.Do(t, Req{Method: "OPTIONS", Path: "/s/" + l.id, Header: map[string]string{"Origin": "https://x.example"}}).WantStatus(t, http.StatusNoContent)
	for _, req := range []Req{
		{Method: "GET", Path: "/readyz"},
		{Method: "GET", Path: "/v1/version"},
		{Method: "GET", Path: "/v1/openapi.yaml"},
		{Method: "GET", Path: "/metrics"},
		{Method: "GET", Path: "/v1/albums", Token: tok.Access},
		{Method: "POST", Path: "/v1/auth/login", Body: map[string]any{"email": "listener@example.org", "password": servertest.Password}},
		{Method: "DELETE", Path: "/v1/shares/" + l.id, Token: tok.Access},
		{Method: "OPTIONS", Path: "/v1/albums", Header: map[string]string{"Origin": "https://x.example", "Access-Control-Request-Method": "GET"}},
		{Method: "GET", Path: "/"},
		{Method: "GET", Path: "/s"},
	} {
		r := servertest.Client{BaseURL: shares}.Do(t, req)
		r.WantProblem(t, http.StatusNotFound, "error.not_found")
		if acao := r.Header.Get("Access-Control-Allow-Origin"); acao != "" {
			t.Errorf("%s %s: Access-Control-Allow-Origin %q", req.Method, req.Path, acao)
		}
	}
	// The link is still live: the DELETE above never reached the API.
	ts.Do(t, Req{Method: "GET", Path: "/s/" + l.id}).WantStatus(t, http.StatusOK)

	// One bucket per address across both listeners: 5 tokens, 4 spent.
	servertest.Client{BaseURL: shares}.Do(t, Req{Method: "GET", Path: "/s/" + l.id}).WantStatus(t, http.StatusOK)
	ts.Do(t, Req{Method: "GET", Path: "/s/" + l.id}).WantStatus(t, http.StatusOK)
	r := servertest.Client{BaseURL: shares}.Do(t, Req{Method: "GET", Path: "/s/" + l.id})
	r.WantProblem(t, http.StatusTooManyRequests, "error.rate_limited")
	wantShareCORS(t, r)

	ts.WantMetric(t,
		`sealbox_http_requests_total{listener="share",method="GET",route="/s/:opaque_id",status="200"} 2`,
		`sealbox_http_requests_total{listener="share",method="GET",route="/s/:opaque_id",status="429"} 1`,
		`sealbox_http_requests_total{listener="share",method="GET",route="unmatched",status="404"} 7`,
		`sealbox_http_requests_total{listener="main",method="GET",route="/s/:opaque_id",status="200"} 2`,
		`sealbox_limit_refusals_total{limit="share-rate"} 1`,
	)
}
