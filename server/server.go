// Package server is sealbox's HTTP surface: routes, middleware and thin
// handlers over the kv store and the blob store. It knows nothing about
// bbolt.
package server

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"sealbox/blobs"
	"sealbox/kv"
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

// Config holds every tunable of the server. DefaultConfig gives the
// production values of server/PROTOCOL.md §12; tests shrink the costly ones.
type Config struct {
	// EngineMetrics, when set, gathers the series the engines registered
	// themselves (the S3 engine's request latency, on a registry the
	// caller gave it); the metrics listener serves them beside the
	// server's own.
	EngineMetrics prometheus.Gatherer
	// Registration is RegistrationOpen, RegistrationClosed or
	// RegistrationInvite.
	Registration string
	// TrustProxy takes the client address from the last hop of
	// X-Forwarded-For instead of the TCP peer.
	TrustProxy bool
	// MaxBody limits ordinary request bodies.
	MaxBody int64
	// MaxBlob limits one uploaded blob.
	MaxBlob int64
	// InlineMax is the largest blob kept in the store instead of the blob
	// engine (see inline.go); 0 keeps every blob in the engine.
	InlineMax int64
	// MaxUploadSessions and MaxTransfers cap an account's open upload
	// sessions and open tus transfers; MaxPendingBytes caps the lengths its
	// open transfers declare together, whatever its quota. 0 is no cap.
	MaxUploadSessions int
	MaxTransfers      int
	MaxPendingBytes   int64
	// UploadBufferAccount and UploadBufferTotal bound the memory uploads in
	// flight hold for their bodies, one account's and all of them (see
	// uploadbuffer.go).
	UploadBufferAccount int64
	UploadBufferTotal   int64
	// DefaultQuota is the quota in bytes of every account registration
	// creates; 0 is unlimited.
	DefaultQuota int64
	// Trash is how long a deleted photo stays restorable before its blobs
	// are released (server/PROTOCOL.md §9).
	Trash time.Duration

	AccessTTL   time.Duration
	RefreshTTL  time.Duration
	FreshWindow time.Duration

	LockoutFailures int
	LockoutWindow   time.Duration

	// TOTPAttempts wrong codes in any TOTPAttemptWindow are the most an
	// account's signed-in code checks (verify-enrollment, disable) take;
	// then 429 until the oldest leaves the window.
	TOTPAttempts      int
	TOTPAttemptWindow time.Duration
	// SessionMaxAge is the absolute lifetime of a refresh chain, from the
	// sign-in that began it: no refresh extends it, and no token of the
	// chain outlives it.
	SessionMaxAge time.Duration

	// Argon2 are the parameters new password hashes are made with.
	Argon2 password.Params

	// SealKey is the 32-byte key (server.key in the data directory) that
	// seals TOTP secrets at rest and keys enrollment fallback lookups (see
	// package secrets). It never enters the database, so a copy of the
	// database alone reveals no secret. New panics on another length: serve
	// checks the file when it loads it.
	SealKey []byte

	// ProtocolMin and ProtocolMax are the protocol dates (YYYY-MM-DD) the
	// server speaks. AlbumProtocol is the date new albums are pinned to;
	// empty means ProtocolMax.
	ProtocolMin   string
	ProtocolMax   string
	AlbumProtocol string
	// UpgradeWindow is how long an upgrade ceremony may wait for its
	// album's upload sessions to drain before it is aborted.
	UpgradeWindow time.Duration

	// CORSOrigins are the origins (scheme://host[:port], exactly as a
	// browser sends Origin) whose pages may call the authenticated API;
	// without any the API is same-origin. Share reads are open to every
	// origin regardless.
	CORSOrigins []string

	// ShareRate and ShareBurst are the token bucket each client address
	// spends on public share reads: ShareBurst at once, then ShareRate per
	// second.
	ShareRate  float64
	ShareBurst int
	// AuthRate and AuthBurst are the token bucket each client address
	// spends on registrations and logins: AuthBurst at once, then AuthRate
	// per minute. The lockout counts wrong passwords per email; this bounds
	// the argon2id work one address can ask for across emails.
	AuthRate  float64
	AuthBurst int
	// HashWait is how long a password hash or verification may wait, in
	// arrival order, for one of the GOMAXPROCS argon2id slots; one that
	// could not start within it answers 503 error.limit.hash_queue with
	// Retry-After.
	HashWait time.Duration

	// RelayChannels caps the relay channels one account has open, and
	// RelayBytes the payload bytes waiting undrained in all of them.
	RelayChannels int
	RelayBytes    int64

	// MaxShareLinks caps the link records one account has (revoked links
	// count for the 30 days their record is kept) and MaxShareServes the
	// blobs its links serve together: the bound on the store one account's
	// links take (server/PROTOCOL.md §7).
	MaxShareLinks  int
	MaxShareServes int

	// DirectoryPublishes is how many directory publishes an account earns
	// back per hour, DirectoryBurst how many it may make at once: the bound
	// on each account's growth of the transparency log.
	DirectoryPublishes int
	DirectoryBurst     int

	// TusLeaseTTL is how long a tus PATCH or DELETE holds its transfer's
	// lease in the store without renewing it; a writing request renews it
	// every third of that. A node killed mid-PATCH leaves the transfer
	// refused (423) to every other writer for at most this long; the same
	// node restarted releases them at once (NodeID).
	TusLeaseTTL time.Duration
	// NodeID names this node among those sharing the store, the same across
	// its restarts (serve keeps it in the data directory): every lease the
	// server takes is held under "NodeID/", so a restarted node can release
	// what its previous run held (kv.Store.ReleaseLeasesOf). Empty: a random
	// id of this run alone.
	NodeID string
	// PasswordAttemptTTL is how long a password verification in flight
	// counts against its address when its node never ends it (the node
	// died): longer than any verification, the wait for the hasher
	// included.
	PasswordAttemptTTL time.Duration

	// ReadHeaderTimeout is how long a client may take to send a request's
	// headers before the connection is closed (slow-header clients).
	ReadHeaderTimeout time.Duration
	// BodyTimeout bounds how slowly a request body may arrive: a buffered
	// body (JSON, CBOR, escrow) gets BodyTimeout per MiB of its limit, one
	// MiB at least; a streamed body (a blob, a tus PATCH) may pause for
	// BodyTimeout between bytes. A client past it is cut off.
	BodyTimeout time.Duration
	// AnonBodyTimeout is how long the body of a route anyone may call
	// without a token (register, login, refresh, a relay post) may take to
	// arrive, all of it: such bodies are small, and a stalled one must not
	// hold memory and a connection for long.
	AnonBodyTimeout time.Duration
	// WriteStall is how long one response write (at most 64 KiB) may make
	// no progress before the connection is closed (at most a sixteenth
	// more: the deadline is not set afresh for every write): a client that
	// stops reading cannot hold a connection, a file and a goroutine for
	// ever.
	WriteStall time.Duration
	// IPv6Prefix is the prefix length an IPv6 client address is keyed on by
	// the rate limits: one subscriber usually holds a whole /64.
	IPv6Prefix int

	// LogKey signs the transparency log's checkpoints. Without one, New
	// makes a key that lives as long as the process (tests; serve always
	// gives the one kept in the data directory). The server itself signs
	// nothing: it serves what translog hands out, and the witness worker
	// has translog sign, in the background.
	LogKey translog.Key
	// Witnesses are the verifier keys of the witnesses that cosign the
	// log's checkpoints, whose state /readyz and the metrics report.
	Witnesses []string
	// WitnessQuorum is how many of them must cosign a checkpoint before
	// GET /v1/transparency/checkpoint serves it; 0 serves the newest
	// signed checkpoint.
	WitnessQuorum int

	// Now is the clock; Rand the source of every token and id.
	Now  func() time.Time
	Rand io.Reader
	Log  zerolog.Logger
}

// The registration modes (server/PROTOCOL.md §2): anyone may register,
// nobody may, or whoever holds an invitation the operator issued.
const (
	RegistrationOpen   = "open"
	RegistrationClosed = "closed"
	RegistrationInvite = "invite"
)

// DefaultConfig returns the production defaults.
func DefaultConfig() Config {
	return Config{
		Registration:        RegistrationOpen,
		MaxBody:             1 << 20,
		MaxBlob:             16 << 30,
		InlineMax:           16 << 10,
		MaxUploadSessions:   64,
		MaxTransfers:        16,
		MaxPendingBytes:     64 << 30,
		UploadBufferAccount: 16 << 20,
		UploadBufferTotal:   48 << 20,
		MaxShareLinks:       1000,
		MaxShareServes:      100_000,
		Trash:               30 * 24 * time.Hour,
		AccessTTL:           15 * time.Minute,
		RefreshTTL:          30 * 24 * time.Hour,
		FreshWindow:         10 * time.Minute,
		LockoutFailures:     10,
		LockoutWindow:       15 * time.Minute,
		TOTPAttempts:        5,
		TOTPAttemptWindow:   5 * time.Minute,
		SessionMaxAge:       365 * 24 * time.Hour,
		Argon2:              password.Default,
		ProtocolMin:         "2025-01-15",
		ProtocolMax:         "2026-09-01",
		ShareRate:           20,
		ShareBurst:          200,
		RelayChannels:       8,
		RelayBytes:          16 << 20,
		DirectoryPublishes:  60,
		DirectoryBurst:      10,
		AuthRate:            10,
		AuthBurst:           5,
		HashWait:            password.DefaultWait,
		UpgradeWindow:       15 * time.Minute,
		TusLeaseTTL:         30 * time.Second,
		PasswordAttemptTTL:  time.Minute,
		ReadHeaderTimeout:   10 * time.Second,
		BodyTimeout:         time.Minute,
		AnonBodyTimeout:     10 * time.Second,
		WriteStall:          time.Minute,
		IPv6Prefix:          64,
		Now:                 time.Now,
		Rand:                rand.Reader,
		Log:                 zerolog.Nop(),
	}
}

// withDefaults is c with what it leaves unset filled in: AlbumProtocol
// follows ProtocolMax, a missing clock, random source or log key is the
// production one (an ephemeral key), and a timeout, lease or upload buffer
// limit of zero takes DefaultConfig's value. It is the one place a value
// missing from a Config is decided.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Now == nil {
		c.Now = d.Now
	}
	if c.Rand == nil {
		c.Rand = d.Rand
	}
	if c.AlbumProtocol == "" {
		c.AlbumProtocol = c.ProtocolMax
	}
	if c.UploadBufferAccount <= 0 {
		c.UploadBufferAccount = d.UploadBufferAccount
	}
	if c.UploadBufferTotal <= 0 {
		c.UploadBufferTotal = d.UploadBufferTotal
	}
	for _, dur := range []struct{ v, def *time.Duration }{
		{&c.ReadHeaderTimeout, &d.ReadHeaderTimeout}, {&c.BodyTimeout, &d.BodyTimeout},
		{&c.AnonBodyTimeout, &d.AnonBodyTimeout}, {&c.WriteStall, &d.WriteStall},
		{&c.TusLeaseTTL, &d.TusLeaseTTL}, {&c.PasswordAttemptTTL, &d.PasswordAttemptTTL},
	} {
		if *dur.v <= 0 {
			*dur.v = *dur.def
		}
	}
	if c.LogKey.Signer == nil {
		key, err := translog.NewKey(c.Rand, "sealbox/ephemeral")
		if err != nil {
			panic("server: " + err.Error())
		}
		c.LogKey = key
	}
	return c
}

// Server serves the sealbox API over one store and one blob store.
type Server struct {
	cfg     Config
	secrets *secrets.Keeper
	// scheme is "https" after StartTLS, and empty for plain HTTP.
	scheme    string
	store     *kv.Store
	blobs     blobs.Engine
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
		log:          cfg.Log,
		now:          cfg.Now,
		translog:     translog.New(store, cfg.LogKey, cfg.WitnessQuorum),
		redeem:       ratelimit.NewRedeem(redeemRefusalsPerAddr, redeemFallbackRefusals, redeemWindow, cfg.Now),
		node:         nodeName(cfg.NodeID, ids.UUID(cfg.Rand)),
		shareLimiter: ratelimit.New(cfg.ShareRate, cfg.ShareBurst, cfg.Now),
		corsOrigins:  corsOriginSet(cfg.CORSOrigins),
		authLimiter:  ratelimit.New(cfg.AuthRate/60, cfg.AuthBurst, cfg.Now),
	}
	s.hasher = password.NewHasher(cfg.Argon2, cfg.Rand, cfg.HashWait)
	s.signin = signin.New(store, s.hasher, signin.Options{
		Lockout:    kv.LockoutPolicy{Failures: cfg.LockoutFailures, Window: cfg.LockoutWindow},
		AttemptTTL: cfg.PasswordAttemptTTL,
		Entry:      s.claimID,
		Log:        cfg.Log,
	})
	s.transfers = transfer.New(store, blobStore, cfg.Log, cfg.TusLeaseTTL, uploadIdle)
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
