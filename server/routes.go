package server

import (
	"context"
	"net/http"
	"sort"
	"strings"

	"github.com/julienschmidt/httprouter"

	"sealbox/kv"
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
	s.router.NotFound = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, kv.Errorf(kv.ECodeNotFound, "no such resource"))
	})
	s.router.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, kv.Errorf(kv.ECodeMethodNotAllowed, "method not allowed on this resource"))
	})
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
	s.router.Handle(method, sharedPrefix+"/*rest", func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		segs := strings.Split(strings.TrimPrefix(ps.ByName("rest"), "/"), "/")
		for _, rt := range s.shared[method] {
			if params, ok := rt.match(segs); ok {
				infoFrom(r).route = rt.pattern
				if err := rt.h(w, r, params); err != nil {
					s.writeError(w, r, err)
				}
				return
			}
		}
		s.router.NotFound.ServeHTTP(w, r)
	})
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
			return kv.Errorf(kv.ECodeUnauthenticated, "an access token is required")
		}
		sess, err := s.store.Authenticate(token)
		if err != nil {
			return err
		}
		return h(w, r.WithContext(context.WithValue(r.Context(), ctxSession, sess)), ps)
	}
}

// caller is the session of a bearer-authenticated request.
func caller(r *http.Request) *kv.Session {
	return r.Context().Value(ctxSession).(*kv.Session)
}
