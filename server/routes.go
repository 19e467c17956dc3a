package server

import (
	"net/http"

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
	s.registerSharePageRoutes()
	s.registerOpRoutes()
	s.registerFeedRoutes()
	s.registerAssetRoutes()
	s.registerTrashRoutes()
	s.registerHoldingRoutes()
	s.registerUpgradeRoutes()
	s.registerOpenAPIRoutes()
	s.registerTusRoutes()
	return s.router
}

// route is one registration: a method and its pattern in httprouter syntax
// (":name" parameters). httprouter cannot list its routes, so handle and
// handleOverlapping record each one; the OpenAPI test walks the list.
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

// bearer wraps a handler that needs an authenticated caller: a missing,
// unknown, revoked or expired access token answers 401 with
// WWW-Authenticate; otherwise the caller's session is in the context.
func (s *Server) bearer(h handlerFunc) handlerFunc {
	return s.authenticated(h, func(token string) (*kv.Session, *kv.Account, error) {
		sess, err := s.store.Authenticate(token)
		return sess, nil, err
	})
}

// bearerAccount is bearer for a handler whose work is the caller's own
// account (callerAccount): the session and the account are read together,
// with one statement on PostgreSQL (kv.Store.AuthenticateAccount).
func (s *Server) bearerAccount(h handlerFunc) handlerFunc {
	return s.authenticated(h, s.store.AuthenticateAccount)
}

// authenticated runs h once authenticate has found the live session of the
// request's bearer token (and, for bearerAccount, its account).
func (s *Server) authenticated(h handlerFunc, authenticate func(token string) (*kv.Session, *kv.Account, error)) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
		token := bearerToken(r)
		if token == "" {
			return fault.Errorf(fault.ECodeUnauthenticated, "an access token is required")
		}
		sess, acct, err := authenticate(token)
		if err != nil {
			return err
		}
		info := infoFrom(r)
		info.session, info.account = sess, acct
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

// callerAccount is the account of a request that passed bearerAccount.
func callerAccount(r *http.Request) *kv.Account { return infoFrom(r).account }

// signedIn reports whether the request passed bearer: a session is known.
func signedIn(r *http.Request) bool { return infoFrom(r).session != nil }
