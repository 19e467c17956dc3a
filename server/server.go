// Package server is sealbox's HTTP surface: routes, middleware and thin
// handlers over the kv store and the blob store. It knows nothing about
// bbolt.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/rs/zerolog"

	"sealbox/blobs"
	"sealbox/kv"
	"sealbox/server/content"
	"sealbox/server/ids"
	"sealbox/server/password"
	"sealbox/server/ratelimit"
	"sealbox/server/secrets"
	"sealbox/server/signin"
	"sealbox/server/transfer"
	"sealbox/server/translog"
)

// Version is the server's semantic version, reported by GET /v1/version.
const Version = "0.1.0"

// Server serves the sealbox API over one store and one blob store.
type Server struct {
	cfg     Config
	secrets *secrets.Keeper
	// scheme is "https" after StartTLS, and empty for plain HTTP.
	scheme string
	store  *kv.Store
	blobs  blobs.Engine
	// content places and opens blobs: inline in store, or files of blobs.
	content   *content.Content
	log       zerolog.Logger
	now       func() time.Time
	router    *httprouter.Router
	overlaps  map[string][]overlapRoute // by method (see overlapPrefix)
	routeList []route                   // every registration, in order (see route)
	handler   http.Handler
	// signin runs the password work of sign-in, registration and
	// password change.
	signin *signin.Checker
	// hasher is signin's: its waiters are a gauge of the metrics.
	hasher *password.Hasher
	// translog hands out the transparency log's checkpoints, key and tiles.
	translog *translog.Log
	metrics  *metrics
	redeem   *ratelimit.Redeem
	// transfers writes resumable uploads (the tus handlers' data store).
	transfers *transfer.Transfers
	// uploadBuffers counts the memory uploads in flight hold.
	uploadBuffers *uploadBuffers
	// shareLimiter holds each client address to its rate of share reads.
	shareLimiter *ratelimit.Limiter
	// readyMu serializes readiness checks; readyLast is the latest verdict.
	readyMu   sync.Mutex
	readyLast readyVerdict
	// authLimiter holds each client address to its rate of registrations
	// and logins.
	authLimiter *ratelimit.Limiter
	// node names this Server among the nodes sharing the store: a
	// request's lease on a transfer and its password verification in
	// flight are held by node and a claim number (nextClaim).
	node      string
	nextClaim atomic.Uint64

	ln       net.Listener
	httpSrv  *http.Server
	bg       sync.WaitGroup
	closeErr error
	once     sync.Once

	// shareHandler serves the share listener (StartShares), which answers
	// only the share reads and the liveness probe; handler serves the
	// main one.
	shareHandler http.Handler
	shareLn      net.Listener
	shareSrv     *http.Server
	// shareScheme is "https" when the share listener serves TLS.
	shareScheme string
	// corsOrigins are the origins allowed to call the API (CORSOrigins).
	corsOrigins map[string]bool
}

// New builds a server over store and the blob store blobStore. The store's
// clock should be cfg.Now.
func New(cfg Config, store *kv.Store, blobStore blobs.Engine) *Server {
	cfg = cfg.withDefaults()
	// serve checks server.key's length when it loads the file, so a key
	// refused here is a programming error.
	keeper, err := secrets.New(cfg.SealKey, cfg.Rand)
	if err != nil {
		panic("server: " + err.Error())
	}
	s := &Server{
		cfg:          cfg,
		secrets:      keeper,
		store:        store,
		blobs:        blobStore,
		content:      content.New(store, blobStore, cfg.InlineMax),
		log:          cfg.Log,
		now:          cfg.Now,
		redeem:       ratelimit.NewRedeem(redeemRefusalsPerAddr, redeemFallbackRefusals, redeemWindow, cfg.Now),
		node:         nodeName(cfg.NodeID, ids.UUID(cfg.Rand)),
		shareLimiter: ratelimit.New(cfg.ShareRate, cfg.ShareBurst, cfg.Now),
		corsOrigins:  corsOriginSet(cfg.CORSOrigins),
		authLimiter:  ratelimit.New(cfg.AuthRate/60, cfg.AuthBurst, cfg.Now),
	}
	if s.translog = cfg.TransparencyLog; s.translog == nil {
		s.translog = translog.New(store, cfg.LogKey, cfg.WitnessQuorum)
	}
	s.hasher = password.NewHasher(cfg.Argon2, cfg.Rand, cfg.HashWait)
	s.signin = signin.New(store, s.hasher, signin.Options{
		Lockout:    kv.LockoutPolicy{Failures: cfg.LockoutFailures, Window: cfg.LockoutWindow},
		AttemptTTL: cfg.PasswordAttemptTTL,
		Entry:      s.claimID,
		Log:        cfg.Log,
	})
	s.transfers = transfer.New(store, blobStore, s.content, cfg.Log, cfg.TusLeaseTTL, uploadIdle)
	s.uploadBuffers = newUploadBuffers(cfg.UploadBufferAccount, cfg.UploadBufferTotal)
	s.metrics = newMetrics(s)
	s.router = s.routes()
	s.handler = s.withMiddleware("main", s.withCORS(s.router))
	s.shareHandler = s.withMiddleware("share", s.shareOnly(s.withCORS(s.router)))
	return s
}

// nodeName names this run of a node: its stable id (when it has one) and
// run, a fresh id, so that no holder of this run is one its previous run
// used.
func nodeName(nodeID, run string) string {
	if nodeID == "" {
		return run
	}
	return nodeID + "/" + run
}

// Handler is the full HTTP stack: middleware, router and handlers.
func (s *Server) Handler() http.Handler { return s.handler }

// ShareHandler is the share listener's stack: the same router and share
// rate limit, answering only /s/..., the share page's files and /healthz.
func (s *Server) ShareHandler() http.Handler { return s.shareHandler }

// Open listens on addr and serves in the background: a busy port fails
// here, at once.
func (s *Server) Open(addr string) error {
	ln, err := Listen(addr)
	if err != nil {
		return err
	}
	s.Start(ln)
	return nil
}

// Listen opens the TCP listener a server is started on. A caller that must
// know the port is free before doing anything else (serve, before it creates
// a data directory) listens first and calls Start.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}

// Start serves on ln, which the server owns from now on.
func (s *Server) Start(ln net.Listener) {
	s.ln = ln
	s.httpSrv = s.newHTTPServer(s.handler)
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		if err := s.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error().Err(err).Msg("serve")
		}
	}()
}

// newHTTPServer is the http.Server of one listener.
func (s *Server) newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler: h,
		// Headers must arrive promptly (slow-header clients are cut off);
		// bodies and responses have no overall deadline, because a blob
		// upload or download over a home uplink may take hours: instead a
		// body may not pause for long (readBody, bodyReader) and neither
		// may a response write (withWriteStall), on HTTP/1 connections and
		// HTTP/2 streams alike.
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          stdLog(s.log),
	}
}

// StartShares serves the share-only stack (ShareHandler) on ln, which the
// server owns from now on, beside the main listener; tlsConfig, when not
// nil, serves HTTPS as StartTLS does. Call it after Start or StartTLS.
func (s *Server) StartShares(ln net.Listener, tlsConfig *tls.Config) {
	s.shareScheme = "http"
	if tlsConfig != nil {
		s.shareScheme = "https"
		ln = tls.NewListener(ln, tlsConfig)
	}
	s.shareLn = ln
	s.shareSrv = s.newHTTPServer(s.shareHandler)
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		if err := s.shareSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error().Err(err).Msg("serve shares")
		}
	}()
}

// StartTLS serves HTTPS on ln with cfg, as Start serves HTTP. cfg should
// offer "h2" in NextProtos: HTTP/2 is then negotiated as with ServeTLS.
func (s *Server) StartTLS(ln net.Listener, cfg *tls.Config) {
	s.scheme = "https"
	s.Start(tls.NewListener(ln, cfg))
}

// URL is the base URL the server listens on.
func (s *Server) URL() string {
	if s.scheme == "" {
		return "http://" + s.ln.Addr().String()
	}
	return s.scheme + "://" + s.ln.Addr().String()
}

// ShareURL is the base URL of the share listener (StartShares).
func (s *Server) ShareURL() string {
	return s.shareScheme + "://" + s.shareLn.Addr().String()
}

// Close stops accepting connections, lets in-flight requests finish (until
// ctx ends) and waits for the goroutines serving them. The store stays open: its owner
// closes it.
func (s *Server) Close(ctx context.Context) error {
	s.once.Do(func() {
		if s.shareSrv != nil {
			s.closeErr = s.shareSrv.Shutdown(ctx)
		}
		if s.httpSrv != nil {
			s.closeErr = errors.Join(s.closeErr, s.httpSrv.Shutdown(ctx))
		}
		s.bg.Wait()
	})
	return s.closeErr
}
