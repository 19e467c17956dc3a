package server

import (
	"crypto/rand"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"sealbox/server/password"
	"sealbox/server/translog"
)

// Config holds every tunable of the server. DefaultConfig gives the
// production values of server/PROTOCOL.md §12, Validate the rules they
// obey; tests shrink the costly ones. The knobs an operator sets are
// grouped (Limits, Rates, Timeouts, Protocol, Witnessing), each field
// promoted so that cfg.MaxBlob reads as before; the fields outside the
// groups are wired by the caller (keys, clock, logger, metrics), but for
// Registration, TrustProxy and CORSOrigins. TLS is the listener's, not the
// server's: cli holds it.
type Config struct {
	// Registration is RegistrationOpen, RegistrationClosed or
	// RegistrationInvite.
	Registration string
	// TrustProxy takes the client address from the last hop of
	// X-Forwarded-For instead of the TCP peer.
	TrustProxy bool
	// CORSOrigins are the origins (scheme://host[:port], exactly as a
	// browser sends Origin) whose pages may call the authenticated API;
	// without any the API is same-origin. Share reads are open to every
	// origin regardless.
	CORSOrigins []string

	Limits
	Rates
	Timeouts
	Protocol
	Witnessing

	// EngineMetrics, when set, gathers the series the engines registered
	// themselves (the S3 engine's request latency, on a registry the
	// caller gave it); the metrics listener serves them beside the
	// server's own.
	EngineMetrics prometheus.Gatherer
	// TransparencyLog, when set, is the log the server serves: serve hands
	// it the one it shares with the witness worker. Nil: the log of the
	// store, signed with LogKey, served as WitnessQuorum asks.
	TransparencyLog *translog.Log
	// Argon2 are the parameters new password hashes are made with.
	Argon2 password.Params
	// SealKey is the 32-byte key (server.key in the data directory) that
	// seals second-factor secrets at rest and keys enrollment fallback
	// lookups (see package secrets). It never enters the database, so a
	// copy of the database alone reveals no secret. New panics on another
	// length: serve checks the file when it loads it.
	SealKey []byte
	// NodeID names this node among those sharing the store, the same across
	// its restarts (serve keeps it in the data directory): every lease the
	// server takes is held under "NodeID/", so a restarted node can release
	// what its previous run held (kv.Store.ReleaseLeasesOf). Empty: a random
	// id of this run alone.
	NodeID string

	// Now is the clock; Rand the source of every token and id.
	Now  func() time.Time
	Rand io.Reader
	Log  zerolog.Logger
}

// Limits bound what one account, one request or the whole server holds.
type Limits struct {
	// MaxBody limits ordinary request bodies.
	MaxBody int64
	// MaxBlob limits one uploaded blob.
	MaxBlob int64
	// InlineMax is the largest blob kept in the store instead of the blob
	// engine (see server/content); 0 keeps every blob in the engine.
	InlineMax int64
	// MaxUploadSessions and MaxTransfers cap an account's open upload
	// sessions and open tus transfers; MaxPendingBytes caps the lengths its
	// open transfers declare together, whatever its quota.
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
	// MaxShareLinks caps the link records one account has (revoked links
	// count for the 30 days their record is kept) and MaxShareServes the
	// blobs its links serve together: the bound on the store one account's
	// links take (server/PROTOCOL.md §7).
	MaxShareLinks  int
	MaxShareServes int
	// RelayChannels caps the relay channels one account has open, and
	// RelayBytes the payload bytes waiting undrained in all of them.
	RelayChannels int
	RelayBytes    int64
}

// Rates bound how often a client address or an account may act.
type Rates struct {
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
	// DirectoryPublishes is how many directory publishes an account earns
	// back per hour, DirectoryBurst how many it may make at once: the bound
	// on each account's growth of the transparency log.
	DirectoryPublishes int
	DirectoryBurst     int
	// LockoutFailures wrong passwords against one email lock its sign-ins
	// for LockoutWindow.
	LockoutFailures int
	LockoutWindow   time.Duration
	// TOTPAttempts wrong codes in any TOTPAttemptWindow are the most an
	// account's signed-in code checks (verify-enrollment, disable) take;
	// then 429 until the oldest leaves the window.
	TOTPAttempts      int
	TOTPAttemptWindow time.Duration
	// IPv6Prefix is the prefix length an IPv6 client address is keyed on by
	// the rate limits: one subscriber usually holds a whole /64.
	IPv6Prefix int
}

// Timeouts are the lifetimes of credentials and records, and the deadlines
// of requests.
type Timeouts struct {
	// Trash is how long a deleted photo stays restorable before its blobs
	// are released (server/PROTOCOL.md §9).
	Trash time.Duration

	AccessTTL   time.Duration
	RefreshTTL  time.Duration
	FreshWindow time.Duration
	// SessionMaxAge is the absolute lifetime of a refresh chain, from the
	// sign-in that began it: no refresh extends it, and no token of the
	// chain outlives it.
	SessionMaxAge time.Duration
	// UpgradeWindow is how long an upgrade ceremony may wait for its
	// album's upload sessions to drain before it is aborted.
	UpgradeWindow time.Duration

	// HashWait is how long a password hash or verification may wait, in
	// arrival order, for one of the GOMAXPROCS argon2id slots; one that
	// could not start within it answers 503 error.limit.hash_queue with
	// Retry-After.
	HashWait time.Duration
	// PasswordAttemptTTL is how long a password verification in flight
	// counts against its address when its node never ends it (the node
	// died): longer than any verification, the wait for the hasher
	// included.
	PasswordAttemptTTL time.Duration
	// TusLeaseTTL is how long a tus PATCH or DELETE holds its transfer's
	// lease in the store without renewing it; a writing request renews it
	// every third of that. A node killed mid-PATCH leaves the transfer
	// refused (423) to every other writer for at most this long; the same
	// node restarted releases them at once (NodeID).
	TusLeaseTTL time.Duration

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
}

// Protocol is the range of protocol dates (YYYY-MM-DD) the server speaks.
type Protocol struct {
	// ProtocolMin and ProtocolMax are the oldest and newest date.
	// AlbumProtocol is the date new albums are pinned to; empty means
	// ProtocolMax.
	ProtocolMin   string
	ProtocolMax   string
	AlbumProtocol string
}

// Witnessing is the transparency log's signing and its witnesses.
type Witnessing struct {
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
		Registration: RegistrationOpen,
		Limits: Limits{
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
			RelayChannels:       8,
			RelayBytes:          16 << 20,
		},
		Rates: Rates{
			ShareRate:          20,
			ShareBurst:         200,
			AuthRate:           10,
			AuthBurst:          5,
			DirectoryPublishes: 60,
			DirectoryBurst:     10,
			LockoutFailures:    10,
			LockoutWindow:      15 * time.Minute,
			TOTPAttempts:       5,
			TOTPAttemptWindow:  5 * time.Minute,
			IPv6Prefix:         64,
		},
		Timeouts: Timeouts{
			Trash:              30 * 24 * time.Hour,
			AccessTTL:          15 * time.Minute,
			RefreshTTL:         30 * 24 * time.Hour,
			FreshWindow:        10 * time.Minute,
			SessionMaxAge:      365 * 24 * time.Hour,
			UpgradeWindow:      15 * time.Minute,
			HashWait:           password.DefaultWait,
			PasswordAttemptTTL: time.Minute,
			TusLeaseTTL:        30 * time.Second,
			ReadHeaderTimeout:  10 * time.Second,
			BodyTimeout:        time.Minute,
			AnonBodyTimeout:    10 * time.Second,
			WriteStall:         time.Minute,
		},
		Protocol: Protocol{
			ProtocolMin: "2025-01-15",
			ProtocolMax: "2026-09-01",
		},
		Argon2: password.Default,
		Now:    time.Now,
		Rand:   rand.Reader,
		Log:    zerolog.Nop(),
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

// MaxInline bounds InlineMax: an inline blob is a value of a store
// transaction, and every such value is read whole.
const MaxInline = 1 << 20

// century bounds a token bucket's refill: the limiter keeps whole
// nanoseconds per token and refuses a bucket that takes longer.
const century = 100 * 365 * 24 * time.Hour

// Validate refuses the values the server cannot run with, group by group:
// the error is a *ConfigError naming the fields at fault. An empty
// AlbumProtocol is valid (it follows ProtocolMax). Witnesses and
// WitnessQuorum are their caller's to check, who parses the witnesses.
func (c *Config) Validate() error {
	for _, check := range []func() *ConfigError{
		c.validateAccess, c.validateLimits, c.validateRates, c.validateTimeouts, c.validateProtocol,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) validateAccess() *ConfigError {
	if !slices.Contains([]string{RegistrationOpen, RegistrationClosed, RegistrationInvite}, c.Registration) {
		return configErrorf("{Registration} must be open, closed or invite, not %q", c.Registration)
	}
	for _, o := range c.CORSOrigins {
		if err := CheckOrigin(o); err != nil {
			return configErrorf("{CORSOrigins}: %v", err)
		}
	}
	return nil
}

func (c *Config) validateLimits() *ConfigError {
	switch {
	case c.MaxBlob <= 0:
		return configErrorf("{MaxBlob} must be positive")
	case c.InlineMax < 0 || c.InlineMax > MaxInline:
		return configErrorf("{InlineMax} must be 0 to 1MiB")
	case c.MaxUploadSessions < 1 || c.MaxTransfers < 1 || c.MaxPendingBytes <= 0:
		return configErrorf("{MaxUploadSessions}, {MaxTransfers} and {MaxPendingBytes} must be positive")
	case c.UploadBufferAccount <= 0 || c.UploadBufferTotal <= 0:
		return configErrorf("{UploadBufferAccount} and {UploadBufferTotal} must be positive")
	// One link of the largest size must always fit.
	case c.MaxShareLinks < 1 || c.MaxShareServes < 10_000:
		return configErrorf("{MaxShareLinks} must be at least 1 and {MaxShareServes} at least 10000, one link's most")
	case c.RelayChannels < 1:
		return configErrorf("{RelayChannels} must be at least 1")
	// One payload (64 KiB) must always fit.
	case c.RelayBytes < 64<<10:
		return configErrorf("{RelayBytes} must be at least 64KiB, one relay payload")
	}
	return nil
}

func (c *Config) validateRates() *ConfigError {
	switch {
	case !bucketFits(c.ShareRate, c.ShareBurst, time.Second):
		return configErrorf("{ShareRate} must be a positive number and {ShareBurst} at least 1, refilling within a century")
	case !bucketFits(c.AuthRate, c.AuthBurst, time.Minute):
		return configErrorf("{AuthRate} must be a positive number and {AuthBurst} at least 1, refilling within a century")
	case c.DirectoryPublishes < 1 || c.DirectoryPublishes > 3600 || c.DirectoryBurst < 1 || c.DirectoryBurst > 1_000_000:
		return configErrorf("{DirectoryPublishes} must be 1 to 3600 and {DirectoryBurst} 1 to 1000000")
	case c.TOTPAttempts < 1 || c.TOTPAttemptWindow <= 0:
		return configErrorf("{TOTPAttempts} must be at least 1 and {TOTPAttemptWindow} positive")
	case c.IPv6Prefix < 1 || c.IPv6Prefix > 128:
		return configErrorf("{IPv6Prefix} must be 1 to 128")
	}
	return nil
}

func (c *Config) validateTimeouts() *ConfigError {
	switch {
	case c.AnonBodyTimeout <= 0 || c.WriteStall <= 0:
		return configErrorf("{AnonBodyTimeout} and {WriteStall} must be positive")
	case c.ReadHeaderTimeout <= 0 || c.BodyTimeout <= 0 || c.PasswordAttemptTTL <= 0:
		return configErrorf("{ReadHeaderTimeout}, {BodyTimeout} and {PasswordAttemptTTL} must be positive")
	case c.HashWait <= 0:
		return configErrorf("{HashWait} must be positive")
	case c.UpgradeWindow <= 0:
		return configErrorf("{UpgradeWindow} must be positive")
	case c.SessionMaxAge <= 0:
		return configErrorf("{SessionMaxAge} must be positive")
	// The lease is renewed every third of it while a PATCH streams.
	case c.TusLeaseTTL < time.Second:
		return configErrorf("{TusLeaseTTL} must be at least 1s")
	}
	return nil
}

func (c *Config) validateProtocol() *ConfigError {
	for _, d := range []struct{ field, value string }{
		{"ProtocolMin", c.ProtocolMin}, {"ProtocolMax", c.ProtocolMax}, {"AlbumProtocol", c.AlbumProtocol},
	} {
		if d.field == "AlbumProtocol" && d.value == "" {
			continue
		}
		if _, err := time.Parse(time.DateOnly, d.value); err != nil {
			return configErrorf("{"+d.field+"} must be a date YYYY-MM-DD, not %q", d.value)
		}
	}
	// YYYY-MM-DD strings compare in date order.
	if c.ProtocolMin > c.ProtocolMax {
		return configErrorf("{ProtocolMin} %s is after {ProtocolMax} %s", c.ProtocolMin, c.ProtocolMax)
	}
	if c.AlbumProtocol != "" && (c.AlbumProtocol < c.ProtocolMin || c.AlbumProtocol > c.ProtocolMax) {
		return configErrorf("{AlbumProtocol} %s is outside %s..%s", c.AlbumProtocol, c.ProtocolMin, c.ProtocolMax)
	}
	return nil
}

// bucketFits reports whether a token bucket of burst tokens earning rate
// per unit is one the limiter can keep: a positive, finite rate, a burst
// of one at least, and a refill within a century.
func bucketFits(rate float64, burst int, unit time.Duration) bool {
	return rate > 0 && !math.IsInf(rate, 0) && burst >= 1 &&
		float64(burst)/rate <= float64(century/unit)
}

// CheckOrigin refuses an origin a browser would never send in Origin, which
// the server compares exactly: anything but http(s)://host[:port], in
// lower case, without a default port, path, query or user.
func CheckOrigin(o string) error {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		o != u.Scheme+"://"+u.Host || o != strings.ToLower(o) || strings.HasSuffix(o, ":") {
		return fmt.Errorf("%q is not an origin: want scheme://host[:port] as a browser sends it, e.g. https://photos.example.org", o)
	}
	if (u.Scheme == "http" && u.Port() == "80") || (u.Scheme == "https" && u.Port() == "443") {
		return fmt.Errorf("%q names its scheme's default port, which a browser leaves out of Origin: write %s://%s", o, u.Scheme, u.Hostname())
	}
	// A browser sends one host, never a pattern: "*.example.org" would be
	// compared byte for byte and match nothing, while its author believes it
	// opened every subdomain.
	if h := u.Hostname(); net.ParseIP(h) == nil && strings.ContainsFunc(h, func(r rune) bool {
		return !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '.' || r == '-' || r == '_')
	}) {
		return fmt.Errorf("%q is not an origin: its host is not a host name (no wildcards: name each origin)", o)
	}
	return nil
}

// ConfigError is a Config value the server cannot run with. Its message
// names each field at fault as {Field}, the field's Go name, so that a
// caller that sets fields from flags can name the flags instead (Explain).
type ConfigError struct {
	// Fields are the fields at fault, in the order the message names them.
	Fields []string
	format string
	args   []any
}

// configField finds the {Field} marks of a ConfigError's format.
var configField = regexp.MustCompile(`\{([A-Za-z0-9]+)\}`)

// configErrorf is a ConfigError whose format names its fields as {Field};
// args fill the format's verbs, after the fields are named, so that a
// value never reads as a field.
func configErrorf(format string, args ...any) *ConfigError {
	e := &ConfigError{format: format, args: args}
	for _, m := range configField.FindAllStringSubmatch(format, -1) {
		e.Fields = append(e.Fields, m[1])
	}
	return e
}

// Error names the fields by their Go names.
func (e *ConfigError) Error() string {
	return e.Explain(func(field string) string { return field })
}

// Explain is the message with each field named by name(field).
func (e *ConfigError) Explain(name func(field string) string) string {
	format := configField.ReplaceAllStringFunc(e.format, func(m string) string {
		return strings.ReplaceAll(name(m[1:len(m)-1]), "%", "%%")
	})
	return fmt.Sprintf(format, e.args...)
}
