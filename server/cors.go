package server

import (
	"net/http"
	"strings"

	"sealbox/kv/fault"
	"sealbox/server/sharepage"
)

// Cross-origin access (server/PROTOCOL.md §18). The public share reads
// (/s/...) are for a page on any origin: every answer to them, errors and
// unmatched paths included, lets any origin read it, so a page sees a
// revocation (404) or a rate limit (429) as such instead of as a network
// error. No answer ever allows credentials: a share read needs none, and the
// API authenticates with a bearer token a page sends itself, never with a
// cookie. The authenticated API is same-origin unless the operator names
// origins (Config.CORSOrigins).

// The CORS headers' values, shared by every response like the security
// headers in middleware.go.
var (
	corsAnyOrigin = []string{"*"}
	// shareExpose is what a page may read of a share answer beyond the
	// CORS-safelisted headers (Cache-Control, Content-Type, Last-Modified...).
	shareExpose      = []string{"Content-Range, Accept-Ranges, Content-Length, ETag, Last-Modified, Retry-After"}
	crossOrigin      = []string{"cross-origin"}
	shareMethods     = []string{"GET, HEAD, OPTIONS"}
	shareReqHeaders  = []string{"Range, If-None-Match, If-Range, If-Modified-Since"}
	preflightMaxAge  = []string{"7200"}
	varyOrigin       = "Origin"
	apiMethods       = []string{"GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"}
	apiRequestHeader = []string{"Authorization, Content-Type, Range, If-None-Match, If-Range, If-Modified-Since, " +
		"Tus-Resumable, Upload-Length, Upload-Metadata, Upload-Offset, X-Service-Identity-Key"}
	apiExpose = []string{"Content-Range, Accept-Ranges, Content-Length, ETag, Last-Modified, Retry-After, " +
		"Location, WWW-Authenticate, Tus-Resumable, Tus-Version, Tus-Extension, Tus-Max-Size, " +
		"Upload-Offset, Upload-Length, Upload-Metadata, X-Transparency-Index, X-Request-Id"}
	// cspSandbox is the policy of share answers: the default one, and
	// sandbox, so a blob opened as a document (a link followed, a new
	// tab) runs no script and gets an opaque origin, whatever its bytes.
	cspSandbox = []string{"default-src 'none'; frame-ancestors 'none'; sandbox"}
)

// setShareHeaders sets the headers of every /s/ answer: any origin may read
// it, embed it (Cross-Origin-Resource-Policy, for pages that isolate
// themselves with Cross-Origin-Embedder-Policy) and must not run it.
func setShareHeaders(h http.Header) {
	// Canonical keys assigned directly: Set would canonicalize each.
	h["Access-Control-Allow-Origin"] = corsAnyOrigin
	h["Access-Control-Expose-Headers"] = shareExpose
	h["Cross-Origin-Resource-Policy"] = crossOrigin
	h["Content-Security-Policy"] = cspSandbox
}

// withCORS answers preflight requests and lets the named origins read the
// API; the headers of share answers are the middleware's (setShareHeaders),
// set before anything can write. A preflight (OPTIONS) below /s/ answers
// 204 whatever the path: a page learns what its real request gets from
// that request's answer, which carries the CORS headers too. A preflight to
// the API from an origin not named falls through to the router, whose
// answer allows nothing, so the browser refuses the request.
func (s *Server) withCORS(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		if strings.HasPrefix(r.URL.Path, "/s/") {
			if r.Method == http.MethodOptions {
				infoFrom(r).route = "preflight"
				h["Access-Control-Allow-Methods"] = shareMethods
				h["Access-Control-Allow-Headers"] = shareReqHeaders
				h["Access-Control-Max-Age"] = preflightMaxAge
				w.WriteHeader(http.StatusNoContent)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if len(s.corsOrigins) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		// The answer depends on Origin whether or not this one is allowed.
		h.Add("Vary", varyOrigin)
		origin := r.Header.Get("Origin")
		if !s.corsOrigins[origin] {
			next.ServeHTTP(w, r)
			return
		}
		h["Access-Control-Allow-Origin"] = []string{origin}
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			infoFrom(r).route = "preflight"
			h["Access-Control-Allow-Methods"] = apiMethods
			h["Access-Control-Allow-Headers"] = apiRequestHeader
			h["Access-Control-Max-Age"] = preflightMaxAge
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h["Access-Control-Expose-Headers"] = apiExpose
		next.ServeHTTP(w, r)
	})
}

// corsOriginSet is the set of origins allowed to read the API, exactly as a
// browser sends them in Origin (serve validates their form).
func corsOriginSet(origins []string) map[string]bool {
	if len(origins) == 0 {
		return nil
	}
	set := make(map[string]bool, len(origins))
	for _, o := range origins {
		set[o] = true
	}
	return set
}

// shareOnly is the share listener's gate: it passes on the share reads, the
// share page's files and the liveness probe, and answers everything else
// 404, as a path no route matches.
func (s *Server) shareOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/s/") || strings.HasPrefix(r.URL.Path, sharepage.Prefix) || r.URL.Path == "/healthz" {
			next.ServeHTTP(w, r)
			return
		}
		s.writeError(w, r, fault.Errorf(fault.ECodeNotFound, "no such resource"))
	})
}
