package server

import (
	"mime"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"sealbox/kv/fault"
	"sealbox/server/sharepage"
)

// The share page (server/PROTOCOL.md §7.1): a browser that opens a link,
// GET /s/ID asking for HTML, gets the page; everything else asking for
// /s/ID gets the JSON answer as before. The page's scripts, style sheet and
// service worker are served below sharepage.Prefix.

func (s *Server) registerSharePageRoutes() {
	s.handle(http.MethodGet, sharepage.Prefix+":file", s.handleSharePageFile)
}

// The headers of the page and of its service worker. The page runs only
// its own scripts and styles, shows images and video it decrypted (blob:)
// or its service worker decrypts (self), talks to its own origin alone and
// may not be framed.
var (
	cspSharePage = []string{"default-src 'none'; script-src 'self'; style-src 'self'; img-src blob:; media-src 'self' blob:; " +
		"connect-src 'self'; worker-src 'self'; frame-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"}
	cspServiceWorker = []string{"default-src 'none'; script-src 'self'; connect-src 'self'"}
	varyAccept       = []string{"Accept"}
	swAllowed        = []string{"/s/"}
)

// sharePageOr serves the share page to a request that asks for HTML (a
// browser opening the link) and passes every other request to h, whose
// answer is unchanged. The page is the same for every id, known or not:
// serving it reveals nothing about the link.
func (s *Server) sharePageOr(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		if !acceptsHTML(r.Header.Values("Accept")) {
			return h(w, r, ps)
		}
		infoFrom(r).route = "share page"
		hd := w.Header()
		hd["Content-Security-Policy"] = cspSharePage
		hd["Vary"] = varyAccept
		return writeBody(w, http.StatusOK, "text/html; charset=utf-8", "no-cache", sharepage.Page())
	}
}

// acceptsHTML says whether an Accept header names text/html with a
// non-zero quality, as a browser's navigation does. A wildcard (*/*, text/*)
// is not enough: API clients send those, and keep the JSON answer.
func acceptsHTML(accept []string) bool {
	for _, v := range accept {
		for _, part := range strings.Split(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil || mt != "text/html" {
				continue
			}
			if q, ok := params["q"]; ok && strings.Trim(q, "0.") == "" {
				continue
			}
			return true
		}
	}
	return false
}

// handles "GET /share-page/:file": the page's scripts and style sheet,
// whose names carry their content's hash and never change, and its service
// worker, revalidated at each use and allowed to serve the /s/ pages.
func (s *Server) handleSharePageFile(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	f, ok := sharepage.Lookup(ps.ByName("file"))
	if !ok {
		return fault.Errorf(fault.ECodeNotFound, "no such resource")
	}
	cache := "no-cache"
	if f.Immutable {
		cache = "public, max-age=31536000, immutable"
	} else {
		h := w.Header()
		h["Content-Security-Policy"] = cspServiceWorker
		h["Service-Worker-Allowed"] = swAllowed
	}
	return writeBody(w, http.StatusOK, f.ContentType, cache, f.Body)
}
