package server

import (
	"context"
	"net/http"

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
	s.registerTusRoutes()
	return s.router
}

// handle registers h for method and pattern. The pattern, not the raw path,
// is what the access log records.
func (s *Server) handle(method, pattern string, h handlerFunc) {
	s.router.Handle(method, pattern, func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		infoFrom(r).route = pattern
		if err := h(w, r, ps); err != nil {
			s.writeError(w, r, err)
		}
	})
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
