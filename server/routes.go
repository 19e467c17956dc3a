package server

import (
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/julienschmidt/httprouter"

	"sealbox/kv"
	"sealbox/kv/fault"
)

// handlerFunc is the shape of every handler: it returns an error, and
// writeError alone renders it.
type handlerFunc func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error

// routes builds the router. Each resource registers its own routes in its
// own file.
func (s *Server) routes() *httprouter.Router {
	s.router = httprouter.New()
	s.router.RedirectTrailingSlash = false
	s.router.RedirectFixedPath = false
	s.router.HandleMethodNotAllowed = true
	s.router.NotFound = http.HandlerFunc(s.noRoute)
	s.router.MethodNotAllowed = http.HandlerFunc(s.noRoute)
	s.router.GlobalOPTIONS = http.HandlerFunc(s.noRoute)
	s.registerVersionRoutes()
	s.registerHealthRoutes()
	s.registerAuthRoutes()
	s.registerProfileRoutes()
	s.registerTOTPRoutes()
	s.registerDeviceRoutes()
	s.registerAlbumRoutes()
	s.registerUploadRoutes()
	s.registerEscrowRoutes()
	s.registerDirectoryRoutes()
	s.registerTransparencyRoutes()
	s.registerRevokeAllRoutes()
	s.registerRelayRoutes()
	s.registerShareRoutes()
	s.registerOpRoutes()
	s.registerFeedRoutes()
	s.registerUpgradeRoutes()
	s.registerOpenAPIRoutes()
	s.registerTusRoutes()
	return s.router
}

// route is one registration: a method and its pattern in httprouter syntax
// (":name" parameters). httprouter cannot list its routes, so handle and
// handleShared record each one; the OpenAPI test walks the list.
type route struct {
	method, pattern string
}

// handle registers h for method and pattern. The pattern, not the raw path,
// is what the access log records.
func (s *Server) handle(method, pattern string, h handlerFunc) {
	s.routeList = append(s.routeList, route{method, pattern})
	s.router.Handle(method, pattern, func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		infoFrom(r).route = pattern
		if err := h(w, r, ps); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// sharedPrefix is the part of a path below which httprouter (v1.3) cannot
// hold both a parameter and a static name in one segment for one method:
// DELETE /v1/auth/devices/:session_id beside DELETE
// /v1/auth/devices/enroll/channel/:channel_id. Such routes are registered
// through handleShared and dispatched by one catch-all route.
const sharedPrefix = "/v1/auth/devices"

type sharedRoute struct {
	segments []string // below sharedPrefix; ":name" is a parameter
	pattern  string
	h        handlerFunc
}

// handleShared registers h for method and pattern (which must start with
// sharedPrefix). Routes with a static segment win over a parameter in the
// same place.
func (s *Server) handleShared(method, pattern string, h handlerFunc) {
	s.routeList = append(s.routeList, route{method, pattern})
	if s.shared == nil {
		s.shared = map[string][]sharedRoute{}
	}
	rel := strings.TrimPrefix(pattern, sharedPrefix+"/")
	rt := sharedRoute{segments: strings.Split(rel, "/"), pattern: pattern, h: h}
	routes := append(s.shared[method], rt)
	sort.SliceStable(routes, func(i, j int) bool {
		return !strings.HasPrefix(routes[i].segments[0], ":") && strings.HasPrefix(routes[j].segments[0], ":")
	})
	s.shared[method] = routes
	if len(routes) > 1 {
		return
	}
	s.router.Handle(method, sharedPrefix+"/*rest", func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		rt, params, ok := s.sharedMatch(method, r.URL.Path)
		if !ok {
			s.noRoute(w, r)
			return
		}
		infoFrom(r).route = rt.pattern
		if err := rt.h(w, r, params); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// sharedMatch finds the shared route of method that path (below
// sharedPrefix) has the shape of.
func (s *Server) sharedMatch(method, path string) (sharedRoute, httprouter.Params, bool) {
	segs := strings.Split(strings.TrimPrefix(path, sharedPrefix+"/"), "/")
	for _, rt := range s.shared[method] {
		if params, ok := rt.match(segs); ok {
			return rt, params, true
		}
	}
	return sharedRoute{}, nil, false
}

// noRoute answers a request no route takes: httprouter's NotFound,
// MethodNotAllowed and automatic OPTIONS, and the shared catch-all when no
// shared route has the path's shape. The Allow list is computed here rather
// than taken from httprouter, whose list names a method with shared routes
// for every path below sharedPrefix (its catch-all matches them all): a
// path with no route for any method is 404 for every method, OPTIONS
// included; otherwise an OPTIONS request gets the Allow list with 200, as
// from httprouter, and any other method 405 with it.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	allow := s.allowed(r.URL.Path)
	if allow == "" {
		w.Header().Del("Allow")
		s.writeError(w, r, fault.Errorf(fault.ECodeNotFound, "no such resource"))
		return
	}
	w.Header().Set("Allow", allow)
	if r.Method != http.MethodOptions {
		s.writeError(w, r, fault.Errorf(fault.ECodeMethodNotAllowed, "method not allowed on this resource"))
	}
}

// allowed is the Allow value for path by httprouter's rule (the methods with
// a route for it, and OPTIONS, sorted; empty when there are none), except
// that below sharedPrefix a method with shared routes counts only when one
// of them has the path's shape.
func (s *Server) allowed(path string) string {
	var allow []string
	seen := map[string]bool{http.MethodOptions: true}
	for _, rt := range s.routeList {
		m := rt.method
		if seen[m] {
			continue
		}
		seen[m] = true
		var found bool
		if s.shared[m] != nil && strings.HasPrefix(path, sharedPrefix+"/") {
			_, _, found = s.sharedMatch(m, path)
		} else {
			h, _, _ := s.router.Lookup(m, path)
			found = h != nil
		}
		if found {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		return ""
	}
	allow = append(allow, http.MethodOptions)
	slices.Sort(allow)
	return strings.Join(allow, ", ")
}

func (rt sharedRoute) match(segs []string) (httprouter.Params, bool) {
	if len(segs) != len(rt.segments) {
		return nil, false
	}
	var ps httprouter.Params
	for i, want := range rt.segments {
		switch {
		case strings.HasPrefix(want, ":"):
			if segs[i] == "" {
				return nil, false
			}
			ps = append(ps, httprouter.Param{Key: want[1:], Value: segs[i]})
		case segs[i] != want:
			return nil, false
		}
	}
	return ps, true
}

// bearer wraps a handler that needs an authenticated caller: a missing,
// unknown, revoked or expired access token answers 401 with
// WWW-Authenticate; otherwise the caller's session is in the context.
func (s *Server) bearer(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		token := bearerToken(r)
		if token == "" {
			return fault.Errorf(fault.ECodeUnauthenticated, "an access token is required")
		}
		sess, err := s.store.Authenticate(token)
		if err != nil {
			return err
		}
		infoFrom(r).session = sess
		return h(w, r, ps)
	}
}

// fresh is the freshness gate, inside bearer: the session's last credential
// presentation (authenticated_at, which refresh carries over and
// reauthenticate or a password change renews) must be less than
// FreshWindow old.
func (s *Server) fresh(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		if !s.now().Before(caller(r).AuthenticatedAt.Add(s.cfg.FreshWindow)) {
			return fault.Errorf(fault.ECodeReauthRequired, "this operation needs a recent password; reauthenticate first")
		}
		return h(w, r, ps)
	}
}

// caller is the session of a bearer-authenticated request.
func caller(r *http.Request) *kv.Session { return infoFrom(r).session }

// signedIn reports whether the request passed bearer: a session is known.
func signedIn(r *http.Request) bool { return infoFrom(r).session != nil }
