package cli

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/crypto/acme/autocert"

	"sealbox/blobs"
	"sealbox/cli/admin"
	"sealbox/kv"
	"sealbox/kv/durable"
	"sealbox/server"
	"sealbox/server/ids"
	"sealbox/server/maintenance"
	"sealbox/server/secrets"
	"sealbox/server/translog"
	"sealbox/server/witness"
)

// Serve runs the server on a data directory until its context ends.
type Serve struct {
	Location
	Listen string
	// ShareListen, when set, is a second address that answers only the
	// public share reads (/s/...) and /healthz, with the TLS of Listen.
	ShareListen string
	// NoMigrate refuses a store of an older format instead of migrating it.
	NoMigrate bool
	// MetricsListen, when set, serves Prometheus metrics on that address.
	MetricsListen string
	Config        server.Config
	// LogOrigin names the transparency log when its key is made; empty
	// means sealbox/<host name>.
	LogOrigin string
	// TLS, when enabled, serves HTTPS.
	TLS TLS
	// Witnessing signs checkpoints in the background and has its witnesses
	// cosign them; Config.Witnesses and Config.WitnessQuorum are set from
	// it.
	Witnessing witness.Options
	// Maintenance sweeps expired records in the background; its lease
	// holder is named from Config.NodeID.
	Maintenance maintenance.Options
	// Ready, when set, is called with the base URL once the server listens.
	Ready func(url string)
}

// DefaultDataDir is where sealbox keeps its data unless told otherwise.
const DefaultDataDir = "./sealbox-data"

// Paths inside the data directory.
const (
	dbFile   = admin.DBFile
	keyFile  = admin.KeyFile
	blobsDir = admin.BlobsDir
)

// shutdownGrace bounds how long in-flight requests may run after a signal.
const shutdownGrace = 30 * time.Second

func newServeCmd() *cobra.Command {
	s := &Serve{Config: server.DefaultConfig(), Witnessing: witness.DefaultOptions(), Maintenance: maintenance.DefaultOptions()}
	cfg := &s.Config
	var logLevel string
	var witnesses []string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the sealbox server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ignored, err := bindEnv(cmd)
			if err != nil {
				return err
			}
			name := flagNamer(cmd.Flags())
			if err := s.Location.validate(name); err != nil {
				return err
			}
			if err := validateConfig(cfg, name); err != nil {
				return err
			}
			if err := s.TLS.validate(name); err != nil {
				return err
			}
			if err := s.parseWitnesses(witnesses, name); err != nil {
				return err
			}
			if err := s.validateAddresses(name); err != nil {
				return err
			}
			level, err := zerolog.ParseLevel(logLevel)
			if err != nil || !slices.Contains(logLevels, logLevel) {
				return fmt.Errorf("%s must be one of %s, not %q", name("log-level"), strings.Join(logLevels, ", "), logLevel)
			}
			log, closeLog := newLogger(cmd.ErrOrStderr())
			defer closeLog()
			cfg.Log = log.Level(level)
			if len(ignored) > 0 {
				cfg.Log.Warn().Strs("variables", ignored).Msg(ignoredLocationEnv(ignored))
			}
			if passwordOnCommandLine(cmd.Flags()) {
				cfg.Log.Warn().Msg(storePasswordAdvice)
			}
			for _, v := range unknownEnv(os.Environ(), cmd.Root()) {
				cfg.Log.Warn().Str("variable", v).Msg("unknown SEALBOX_ environment variable ignored: no sealbox flag reads it (misspelt?)")
			}
			warnPlainHTTP(cfg.Log, cfg.CORSOrigins, s.Witnessing.Witnesses)
			return s.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	addNodeFlags(f, s, &logLevel, &witnesses)
	addConfigFlags(f, &s.Config)
	documentEnv(f)
	return cmd
}

// addNodeFlags gives serve the flags of the node itself: its data and
// engines, listeners, TLS, the transparency log's origin and witnesses,
// and logging.
func addNodeFlags(f *pflag.FlagSet, s *Serve, logLevel *string, witnesses *[]string) {
	cfg := &s.Config
	f.StringVar(logLevel, "log-level", "info", "least severe log lines written: "+strings.Join(logLevels, ", "))
	f.BoolVar(&s.NoMigrate, "no-migrate", false, "refuse to start on a store of an older format instead of migrating it")
	addLocationFlags(f, &s.Location)
	f.StringVar(&s.Listen, "listen", "127.0.0.1:8080", "address to listen on")
	f.StringVar(&s.ShareListen, "share-listen", "", "second address answering only share links (/s/...) and /healthz, with the TLS of --listen (off when empty)")
	f.StringSliceVar(&cfg.CORSOrigins, "cors-origin", cfg.CORSOrigins, "origins (scheme://host[:port], comma-separated) whose pages may call the API; share links are open to every origin regardless")
	f.StringVar(&s.TLS.CertFile, "tls-cert", "", "serve HTTPS with this PEM certificate (chain); reloaded on SIGHUP")
	f.StringVar(&s.TLS.KeyFile, "tls-key", "", "the PEM private key of --tls-cert; reloaded on SIGHUP")
	f.StringSliceVar(&s.TLS.Domains, "tls-domain", nil, "serve HTTPS with certificates from ACME (Let's Encrypt) for these domains (comma-separated); they must reach --listen on port 443")
	f.StringVar(&s.TLS.ACMEDirectory, "acme-directory", autocert.DefaultACMEDirectory, "the ACME server's directory URL, for --tls-domain")
	f.StringVar(&s.TLS.ACMEEmail, "acme-email", "", "contact address given to the ACME server (expiry warnings), for --tls-domain")
	f.StringVar(&s.TLS.ACMECAFile, "acme-ca", "", "PEM file of CA certificates to trust for the ACME server itself (a private ACME server)")
	f.StringVar(&s.LogOrigin, "log-origin", "", "origin of the transparency log, fixed when its key is made at first start; two instances on one host need distinct values (default sealbox/<host name>)")
	f.StringSliceVar(witnesses, "witness", nil, "a witness that cosigns the transparency log's checkpoints, as VKEY=URL: its C2SP cosignature verifier key and its base URL (repeatable, or comma-separated)")
	f.IntVar(&cfg.WitnessQuorum, "witness-quorum", cfg.WitnessQuorum, "witnesses that must cosign a checkpoint before /v1/transparency/checkpoint serves it (default 1 when any --witness is given)")
	f.DurationVar(&s.Witnessing.Interval, "checkpoint-interval", s.Witnessing.Interval, "least time between two signed checkpoints of the transparency log, and between two submissions to the witnesses")
	f.StringVar(&s.MetricsListen, "metrics-listen", "", "address for Prometheus metrics (off when empty; keep it private)")
	f.BoolVar(&cfg.TrustProxy, "trust-proxy", cfg.TrustProxy, "take the client address from the last hop of X-Forwarded-For")
}

// addConfigFlags gives serve the flags of the server's configuration:
// bodies, limits, lifetimes and protocol dates, each defaulting to
// server.DefaultConfig's value.
func addConfigFlags(f *pflag.FlagSet, cfg *server.Config) {
	f.StringVar(&cfg.Registration, "registration", cfg.Registration, "open, closed, or invite (only with an invitation from `sealbox users invite`)")
	f.Var(sizeFlag{&cfg.MaxBody}, "max-body", "largest ordinary request body (e.g. 1MiB)")
	f.Var(sizeFlag{&cfg.MaxBlob}, "max-blob", "largest uploaded blob (e.g. 16GiB)")
	f.Var(sizeFlag{&cfg.InlineMax}, "inline-max", "largest blob kept in the store itself instead of the blob store, 0 to 1MiB (0: none); at start, blob files up to it move in")
	f.IntVar(&cfg.MaxUploadSessions, "max-upload-sessions", cfg.MaxUploadSessions, "open upload sessions one account may have at once")
	f.IntVar(&cfg.MaxTransfers, "max-transfers", cfg.MaxTransfers, "open resumable (tus) transfers one account may have at once")
	f.Var(sizeFlag{&cfg.MaxPendingBytes}, "max-pending-bytes", "bytes one account's open transfers may declare together, with or without a quota (e.g. 64GiB)")
	f.Var(sizeFlag{&cfg.UploadBufferAccount}, "upload-buffer-account", "memory one account's uploads in flight (blob PUTs, tus PATCHes) may hold for their bodies; another upload beyond it is 429")
	f.Var(sizeFlag{&cfg.UploadBufferTotal}, "upload-buffer-total", "memory all uploads in flight may hold for their bodies; another upload beyond it is 503")
	f.Var(daysFlag{&cfg.Trash}, "trash", "how long a deleted photo stays restorable by its owner before its blobs are released (30d, 36h)")
	f.Var(sizeFlag{&cfg.DefaultQuota}, "default-quota", "quota of every new account, registered or added by `users add` on the running server (e.g. 50GiB; 0: unlimited); `users set-quota` changes one account's")
	f.DurationVar(&cfg.AccessTTL, "access-ttl", cfg.AccessTTL, "access token lifetime")
	f.DurationVar(&cfg.RefreshTTL, "refresh-ttl", cfg.RefreshTTL, "refresh token lifetime")
	f.DurationVar(&cfg.FreshWindow, "fresh-window", cfg.FreshWindow, "how recent a credential presentation must be for sensitive operations")
	f.IntVar(&cfg.LockoutFailures, "lockout-failures", cfg.LockoutFailures, "consecutive failed password checks against one account email (registered or not) that lock sign-ins to it")
	f.DurationVar(&cfg.LockoutWindow, "lockout-window", cfg.LockoutWindow, "how long a lockout lasts")
	f.IntVar(&cfg.TOTPAttempts, "totp-attempts", cfg.TOTPAttempts, "wrong second-factor codes an account's signed-in checks (verify-enrollment, disable) take per --totp-attempt-window")
	f.DurationVar(&cfg.TOTPAttemptWindow, "totp-attempt-window", cfg.TOTPAttemptWindow, "the window --totp-attempts counts over")
	f.DurationVar(&cfg.SessionMaxAge, "session-max-age", cfg.SessionMaxAge, "absolute lifetime of a session's refresh chain, from its sign-in; refreshing does not extend it")
	f.StringVar(&cfg.ProtocolMin, "protocol-min", cfg.ProtocolMin, "oldest protocol date (YYYY-MM-DD) the server speaks")
	f.StringVar(&cfg.ProtocolMax, "protocol-max", cfg.ProtocolMax, "newest protocol date (YYYY-MM-DD) the server speaks")
	f.DurationVar(&cfg.UpgradeWindow, "upgrade-window", cfg.UpgradeWindow, "how long a protocol-upgrade ceremony may wait for quiescence")
	f.DurationVar(&cfg.TusLeaseTTL, "tus-lease", cfg.TusLeaseTTL, "how long a node's claim on a tus transfer outlives the node: after a node dies mid-PATCH, the upload resumes on another node at most this much later")
	f.StringVar(&cfg.AlbumProtocol, "album-protocol", cfg.AlbumProtocol, "protocol date (YYYY-MM-DD) new albums are pinned to (default: --protocol-max)")
	f.Float64Var(&cfg.ShareRate, "share-rate", cfg.ShareRate, "share reads per second each client address earns back")
	f.IntVar(&cfg.ShareBurst, "share-burst", cfg.ShareBurst, "share reads a client address may make at once")
	f.IntVar(&cfg.MaxShareLinks, "max-share-links", cfg.MaxShareLinks, "share links one account may have, live ones and revoked ones for the 30 days their record is kept")
	f.IntVar(&cfg.MaxShareServes, "max-share-serves", cfg.MaxShareServes, "blobs one account's share links may serve together")
	f.IntVar(&cfg.RelayChannels, "relay-channels", cfg.RelayChannels, "enrollment relay channels one account may have open at once")
	f.IntVar(&cfg.DirectoryPublishes, "directory-publishes", cfg.DirectoryPublishes, "directory publishes per hour each account earns back (each is a permanent transparency log record)")
	f.IntVar(&cfg.DirectoryBurst, "directory-burst", cfg.DirectoryBurst, "directory publishes an account may make at once")
	f.Var(sizeFlag{&cfg.RelayBytes}, "relay-bytes", "payload bytes that may wait undrained in all of one account's relay channels (e.g. 16MiB)")
	f.Float64Var(&cfg.AuthRate, "auth-rate", cfg.AuthRate, "registrations and logins per minute each client address earns back")
	f.IntVar(&cfg.AuthBurst, "auth-burst", cfg.AuthBurst, "registrations and logins a client address may make at once")
	f.DurationVar(&cfg.AnonBodyTimeout, "anon-body-timeout", cfg.AnonBodyTimeout, "how long the whole body of a request without a token (login, register, refresh, relay) may take to arrive")
	f.DurationVar(&cfg.ReadHeaderTimeout, "read-header-timeout", cfg.ReadHeaderTimeout, "how long a client may take to send a request's headers before the connection is closed")
	f.DurationVar(&cfg.BodyTimeout, "body-timeout", cfg.BodyTimeout, "how slowly a request body with a token may arrive: a buffered body gets this per MiB of its limit, a streamed one (blob, tus PATCH) may pause this long between bytes")
	f.DurationVar(&cfg.PasswordAttemptTTL, "password-attempt-ttl", cfg.PasswordAttemptTTL, "how long a password check in flight on a node that died still counts against its client address")
	f.DurationVar(&cfg.WriteStall, "write-stall", cfg.WriteStall, "how long a response write (64 KiB at most) may make no progress before the connection is closed")
	f.IntVar(&cfg.IPv6Prefix, "ipv6-prefix", cfg.IPv6Prefix, "prefix length IPv6 client addresses are rate-limited by (one subscriber usually holds a /64)")
	f.DurationVar(&cfg.HashWait, "hash-wait", cfg.HashWait, "how long a sign-in, registration or password change may wait, in arrival order, for one of the GOMAXPROCS password hashing slots; one that could not start within it answers 503")
	// Admission used to be bounded by a count of waiters (--hash-queue): a
	// unit file or environment that still sets it starts with a warning,
	// not a failure.
	f.Int("hash-queue", 0, "")
	_ = f.MarkDeprecated("hash-queue", "password checks now wait up to --hash-wait in arrival order; this flag is ignored")
}

// logLevels are the values --log-level takes, most verbose first.
var logLevels = []string{"debug", "info", "warn", "error"}

// validateConfig refuses flag values the server cannot run with
// (server.Config.Validate), naming each field at fault by its flag as name
// gives it.
func validateConfig(cfg *server.Config, name func(flag string) string) error {
	err := cfg.Validate()
	var bad *server.ConfigError
	if errors.As(err, &bad) {
		flags := configFlags()
		return errors.New(bad.Explain(func(field string) string { return name(flags[field]) }))
	}
	return err
}

// configFlags maps each server.Config field that a serve flag sets to the
// flag's name. It is read off the flag lines themselves (the field each
// flag's value points at), so a new knob needs its flag line and nothing
// else here.
var configFlags = sync.OnceValue(func() map[string]string {
	s := &Serve{Config: server.DefaultConfig()}
	f := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	var logLevel string
	var witnesses []string
	addNodeFlags(f, s, &logLevel, &witnesses)
	addConfigFlags(f, &s.Config)
	fields := map[uintptr]string{}
	configFields(reflect.ValueOf(&s.Config).Elem(), fields)
	flags := map[string]string{}
	f.VisitAll(func(fl *pflag.Flag) {
		if field, ok := fields[flagTarget(fl.Value)]; ok {
			flags[field] = fl.Name
		}
	})
	return flags
})

// configFields records the address of every field of the struct v, the
// fields of its embedded groups included, under the field's name.
func configFields(v reflect.Value, into map[uintptr]string) {
	for i := range v.NumField() {
		sf := v.Type().Field(i)
		if sf.Anonymous && sf.Type.Kind() == reflect.Struct {
			configFields(v.Field(i), into)
			continue
		}
		into[v.Field(i).Addr().Pointer()] = sf.Name
	}
}

// flagTarget is the address of the variable a flag's value sets: the value
// itself for pflag's scalar values (a named type over the variable), or the
// pointer a struct value holds first (sizeFlag, daysFlag, pflag's slices).
func flagTarget(v pflag.Value) uintptr {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && rv.Elem().Kind() != reflect.Struct {
		return rv.Pointer()
	}
	rv = reflect.Indirect(rv)
	if rv.Kind() == reflect.Struct && rv.NumField() > 0 && rv.Field(0).Kind() == reflect.Pointer {
		return rv.Field(0).Pointer()
	}
	return 0
}

// plainRemote reports whether u is plain http to a host other than this
// one: what crosses the network there can be read and changed on the way.
func plainRemote(u *url.URL) bool {
	if u.Scheme != "http" {
		return false
	}
	h := u.Hostname()
	if ip := net.ParseIP(h); ip != nil {
		return !ip.IsLoopback()
	}
	return h != "localhost" && !strings.HasSuffix(h, ".localhost")
}

// warnPlainHTTP warns, at start, of every CORS origin and witness URL that
// is plain http to another host (server/PROTOCOL.md §16 for witnesses):
// allowed, for a lab or a network the operator trusts, but worth a line.
func warnPlainHTTP(log zerolog.Logger, origins []string, witnesses []witness.Witness) {
	for _, o := range origins {
		if u, err := url.Parse(o); err == nil && plainRemote(u) {
			log.Warn().Str("origin", o).Msg("a CORS origin is plain http on another host: pages served from it can be changed on the way, and they hold bearer tokens; use https")
		}
	}
	for _, w := range witnesses {
		if u, err := url.Parse(w.URL); err == nil && plainRemote(u) {
			log.Warn().Str("witness", w.Name()).Str("url", w.Redacted()).Msg("a witness URL is plain http to another host: use https")
		}
	}
}

// Run opens the data directory, serves until ctx ends, then shuts down
// gracefully: in-flight requests finish and the store closes cleanly.
//
// The listeners open first: a busy port fails before the data directory is
// created or the store touched. Everything else that can fail is checked
// before anything is written too (see open).
func (s *Serve) Run(ctx context.Context) error {
	ln, err := server.Listen(s.Listen)
	if err != nil {
		return portHeld(err)
	}
	defer ln.Close() // Start owns it once called; closing it twice is harmless
	var shareLn net.Listener
	if s.ShareListen != "" {
		if shareLn, err = server.Listen(s.ShareListen); err != nil {
			return fmt.Errorf("share listener: %w", portHeld(err))
		}
		defer shareLn.Close()
	}
	var tlsConfig *tls.Config
	var reload func() error
	if s.TLS.Enabled() {
		if tlsConfig, reload, err = s.TLS.config(s.Data); err != nil {
			return err
		}
	}
	store, blobStore, format, release, err := s.open(ctx)
	if err != nil {
		return err
	}
	defer release()
	log := s.Config.Log
	s.settleWitnesses()
	// One transparency log, served by the server and signed by the witness
	// worker. A checkpoint of the log as it is at start is served from the
	// first request; the witness worker signs the next ones.
	transparency := translog.New(store, s.Config.LogKey, s.Config.WitnessQuorum)
	if _, err := transparency.Sign(); err != nil {
		return fmt.Errorf("sign a checkpoint of the transparency log: %w", err)
	}
	s.Config.TransparencyLog = transparency
	srv := server.New(s.Config, store, blobStore)
	// The workers stop, giving their leases up, before the store closes.
	defer startWorker(s.witness(store, transparency))()
	defer startWorker(s.maintenance(store, blobStore))()
	s.start(srv, ln, shareLn, tlsConfig)
	// SIGHUP is caught whatever the configuration: its default action ends
	// the process, and `systemctl reload` (the README's unit) sends it.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go onHangup(ctx, hup, reload, log)
	ops := newOps(s.Location, store, blobStore, s.Config.Argon2)
	ops.DefaultQuota = s.Config.DefaultQuota
	stopAdmin, err := serveAdmin(filepath.Join(s.Data, adminSocket), ops, log)
	if err != nil {
		srv.Close(context.Background())
		return err
	}
	defer stopAdmin()
	log.Info().Str("url", srv.URL()).Str("data", s.Data).Str("store", s.describeStore()).Str("blobs", s.describeBlobs()).Int("store_format", format).
		Str("registration", s.Config.Registration).Str("version", server.Version).Msg("sealbox listening")
	warnOpenRegistration(log, s.Config, ln.Addr())
	if s.MetricsListen != "" {
		stopMetrics, err := serveMetrics(s.MetricsListen, srv.MetricsHandler())
		if err != nil {
			srv.Close(context.Background())
			return err
		}
		defer stopMetrics()
		s.Config.Log.Info().Str("address", s.MetricsListen).Msg("metrics listening")
	}
	if s.Ready != nil {
		s.Ready(srv.URL())
	}
	<-ctx.Done()
	s.Config.Log.Info().Msg("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	return srv.Close(shutdownCtx)
}

// start serves srv on ln, and on shareLn when there is one, over HTTPS when
// tlsConfig is not nil. Both listeners have one certificate source: the
// files, reloaded for both, or ACME for every --tls-domain (the share host
// among them).
func (s *Serve) start(srv *server.Server, ln, shareLn net.Listener, tlsConfig *tls.Config) {
	if tlsConfig != nil {
		srv.StartTLS(ln, tlsConfig)
	} else {
		srv.Start(ln)
	}
	if shareLn != nil {
		srv.StartShares(shareLn, tlsConfig)
		s.Config.Log.Info().Str("url", srv.ShareURL()).Msg("share links listening")
	}
}

// onHangup answers each SIGHUP until ctx ends: certificate files are
// loaded again (a failed load keeps the certificate in use); without them
// there is nothing to reload, which is said rather than acted on.
func onHangup(ctx context.Context, hup <-chan os.Signal, reload func() error, log zerolog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if reload == nil {
				log.Info().Msg("SIGHUP: nothing to reload (no --tls-cert)")
			} else if err := reload(); err != nil {
				log.Error().Err(err).Msg("SIGHUP: the certificate was not reloaded; the old one stays in use")
			} else {
				log.Info().Msg("SIGHUP: TLS certificate reloaded")
			}
		}
	}
}

// readSealKey reads the server key that seals secrets at rest, making it
// (32 random bytes) on first start, to be written (mode 0600) with made.
// It lives beside the database and never inside it, so a copy of the
// database alone reveals no secret. A key file of the wrong size is refused
// rather than replaced: replacing it would make every sealed secret
// unreadable.
func readSealKey(path string, made *[]newFile) ([]byte, error) {
	key, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key = make([]byte, secrets.KeyLen)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		*made = append(*made, newFile{path: path, data: key, what: "server key"})
		return key, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read server key: %w", err)
	}
	if len(key) != secrets.KeyLen {
		return nil, fmt.Errorf("server key %s holds %d bytes, want %d", path, len(key), secrets.KeyLen)
	}
	return key, nil
}

// newFile is a file a first start makes (a key, the node id): held in
// memory until every check that can refuse the start has passed, so a
// refused start writes none of them.
type newFile struct {
	path, what string
	data       []byte
}

// writeNewFiles writes the files a start made, each with writeNewFile.
func writeNewFiles(made []newFile) error {
	for _, f := range made {
		if err := writeNewFile(f.path, f.data); err != nil {
			return fmt.Errorf("create %s: %w", f.what, err)
		}
	}
	return nil
}

// writeNewFile writes a secret file that must not exist yet (mode 0600,
// fsynced). O_EXCL: two processes starting on one fresh directory must not
// each write a key; the loser fails here instead of using a key that is
// then overwritten.
func writeNewFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	err = durable.Close(f, err)
	if err != nil {
		os.Remove(path)
	}
	return err
}

// newLogger logs human-readable lines on a terminal, each as it comes,
// and JSON otherwise, through a logBuffer; closeLog writes what is buffered.
func newLogger(w io.Writer) (log zerolog.Logger, closeLog func() error) {
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			w := zerolog.ConsoleWriter{Out: f, TimeFormat: time.RFC3339}
			return zerolog.New(w).With().Timestamp().Logger(), func() error { return nil }
		}
	}
	buf := newLogBuffer(w, logFlushEvery)
	return zerolog.New(buf).With().Timestamp().Logger(), buf.Close
}

// validateAddresses refuses a listen address that is not HOST:PORT, and
// for a port alone (--listen 8080) says the two addresses meant.
func (s *Serve) validateAddresses(name func(flag string) string) error {
	for _, f := range [][2]string{{"listen", s.Listen}, {"share-listen", s.ShareListen}, {"metrics-listen", s.MetricsListen}} {
		flag, addr := f[0], f[1]
		if addr == "" {
			continue
		}
		if _, err := strconv.ParseUint(addr, 10, 16); err == nil {
			return fmt.Errorf("%s %q is a port without a host: write 127.0.0.1:%s (this machine only) or :%s (every interface)", name(flag), addr, addr, addr)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return fmt.Errorf("%s %q is not HOST:PORT, such as 127.0.0.1:8080 (this machine only) or :8080 (every interface)", name(flag), addr)
		}
	}
	return nil
}

// portHeld says who holds a port a listener could not take: the bare
// "address already in use" names no one.
func portHeld(err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%w: another process holds that port, maybe another sealbox serve; stop it or listen on another port", err)
	}
	return err
}

// serveMetrics serves h on its own listener and returns the function that
// stops it.
func serveMetrics(addr string, h http.Handler) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listener: %w", portHeld(err))
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return func() { srv.Close() }, nil
}

// serveAdmin serves the operator's operations on the unix socket at path
// (mode 0600, and only to this process's user and root: admin.Listen),
// each command leaving an audit line on log, and returns the function that
// stops it and removes the file. Each connection refused is logged with its
// peer's uid.
func serveAdmin(path string, ops *admin.Ops, log zerolog.Logger) (func(), error) {
	ln, err := admin.Listen(path, admin.ListenOptions{
		Refused: func(uid uint32, err error) {
			ev := log.Warn().Str("socket", path)
			if err != nil {
				ev.Err(err).Msg("admin socket: connection refused: its peer's uid could not be read")
				return
			}
			ev.Uint32("peer_uid", uid).Msg("admin socket: connection refused: only the server's user and root may use it")
		},
	})
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: admin.Handler(auditedAdmin{next: ops, log: log}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return func() {
		srv.Close()
		os.Remove(path)
	}, nil
}

// isLoopback reports whether addr can be reached from this host only.
func isLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// parseWitnesses reads the --witness values and checks the quorum: never
// more than the witnesses, and none without them.
func (s *Serve) parseWitnesses(specs []string, name func(flag string) string) error {
	s.Witnessing.Witnesses = nil
	for _, spec := range specs {
		w, err := witness.Parse(spec)
		if err != nil {
			return fmt.Errorf("%s: %w", name("witness"), err)
		}
		s.Witnessing.Witnesses = append(s.Witnessing.Witnesses, w)
	}
	if q, n := s.Config.WitnessQuorum, len(specs); q < 0 || q > n {
		return fmt.Errorf("%s %d: must be between 1 and the %d witnesses given (%s)", name("witness-quorum"), q, n, name("witness"))
	}
	if s.Witnessing.Interval < 100*time.Millisecond {
		return fmt.Errorf("%s must be at least 100ms", name("checkpoint-interval"))
	}
	return nil
}

// settleWitnesses gives the server the witnesses' keys and the quorum: 1
// when any witness is configured and no quorum is.
func (s *Serve) settleWitnesses() {
	s.Config.Witnesses = nil
	for _, w := range s.Witnessing.Witnesses {
		s.Config.Witnesses = append(s.Config.Witnesses, w.VerifierKey)
	}
	if s.Config.WitnessQuorum == 0 && len(s.Witnessing.Witnesses) > 0 {
		s.Config.WitnessQuorum = 1
	}
	s.Witnessing.Quorum = s.Config.WitnessQuorum
}

// worker is work that runs beside the server until its context ends, then
// gives up what it holds (its lease, so another node takes over at once).
type worker interface{ Run(ctx context.Context) }

// startWorker runs w in a goroutine of its own and returns the function
// that stops it and waits for it to return.
func startWorker(w worker) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// witness is the worker that has transparency sign checkpoints and gathers
// the witnesses' cosignatures. Its lease is held under the node's id.
func (s *Serve) witness(store *kv.Store, transparency *translog.Log) worker {
	opts := s.Witnessing
	opts.Log = s.Config.Log
	opts.Node = s.Config.NodeID
	for _, w := range opts.Witnesses {
		s.Config.Log.Info().Str("witness", w.Name()).Str("url", w.Redacted()).Msg("witness configured")
	}
	return witness.New(store, transparency, opts)
}

// maintenance is the runner that sweeps expired records. Its lease is held
// under the node's id.
func (s *Serve) maintenance(store *kv.Store, engine blobs.Engine) worker {
	opts := s.Maintenance
	opts.Log = s.Config.Log
	// A holder of this run alone, under the node's id, so the node's next
	// run releases it at start (kv.Store.ReleaseLeasesOf).
	opts.Holder = s.Config.NodeID + "/" + ids.UUID(s.Config.Rand)
	return maintenance.New(store, engine, opts)
}
