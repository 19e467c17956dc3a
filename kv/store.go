// Package kv is sealbox's store: every record except blob bytes lives in one
// bbolt file. Each exported method runs exactly one bbolt transaction, so
// every check-and-write it performs is atomic (bbolt has a single writer).
// kv knows nothing about HTTP.
package kv

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/fxamacker/cbor/v2"
	bolt "go.etcd.io/bbolt"
)

// Bucket names. All are created at Open, so transactions may assume them.
var (
	bucketAccounts          = []byte("accounts")
	bucketAccountsByEmail   = []byte("accounts_by_email")
	bucketSessions          = []byte("sessions")
	bucketSessionsByAccount = []byte("sessions_by_account")
	bucketAccessTokens      = []byte("access_tokens")
	bucketRefreshTokens     = []byte("refresh_tokens")
	bucketSpentRefresh      = []byte("spent_refresh")
	bucketLockouts          = []byte("lockouts")
	bucketMFAChallenges     = []byte("mfa_challenges")
	bucketCohorts           = []byte("cohorts")
	bucketExpiry            = []byte("expiry")
	bucketAlbums            = []byte("albums")
	bucketAlbumsByAccount   = []byte("albums_by_account")
	bucketBlobs             = []byte("blobs")
	bucketHoldings          = []byte("holdings")
	bucketUploads           = []byte("uploads")
	bucketUploadsByAlbum    = []byte("uploads_by_album")
	bucketUploadBlobs       = []byte("upload_blobs")
	bucketUsage             = []byte("usage")
	bucketTotals            = []byte("totals")
	bucketEscrow            = []byte("escrow")
	bucketDirectories       = []byte("directories")
	bucketRevokeChallenges  = []byte("revoke_challenges")
	bucketEnrollCodes       = []byte("enroll_codes")
	bucketEnrollFallbacks   = []byte("enroll_fallbacks")
	bucketRelayChannels     = []byte("relay_channels")
	bucketRelayMailboxes    = []byte("relay_mailboxes")
	bucketShares            = []byte("shares")
	bucketShareBlobs        = []byte("share_blobs")
	bucketAssets            = []byte("assets")
	bucketAppliedManifests  = []byte("applied_manifests")
	bucketFeed              = []byte("feed")
	bucketUpgrades          = []byte("upgrades")
	bucketTombstones        = []byte("tombstones")

	bucketTransfers          = []byte("transfers")
	bucketTransfersByUpload  = []byte("transfers_by_upload")
	bucketTransfersByAccount = []byte("transfers_by_account")
	bucketTransferRemovals   = []byte("transfer_removals")
)

var allBuckets = [][]byte{
	bucketAccounts, bucketAccountsByEmail, bucketSessions, bucketSessionsByAccount,
	bucketAccessTokens, bucketRefreshTokens, bucketSpentRefresh, bucketLockouts,
	bucketMFAChallenges, bucketCohorts, bucketExpiry,
	bucketAlbums, bucketAlbumsByAccount, bucketBlobs, bucketHoldings,
	bucketUploads, bucketUploadsByAlbum, bucketUploadBlobs, bucketUsage, bucketTotals,
	bucketEscrow, bucketDirectories, bucketRevokeChallenges,
	bucketEnrollCodes, bucketEnrollFallbacks, bucketRelayChannels, bucketRelayMailboxes,
	bucketShares, bucketShareBlobs,
	bucketAssets, bucketAppliedManifests, bucketFeed, bucketUpgrades, bucketTombstones,
	bucketTransfers, bucketTransfersByUpload, bucketTransfersByAccount, bucketTransferRemovals,
	bucketLog, bucketLogMeta,
}

// Options tune a Store. Zero values take the defaults.
type Options struct {
	// Now is the clock; every transaction reads it once. Default time.Now.
	Now func() time.Time
	// OpenTimeout bounds the wait for bbolt's file lock, so a second process
	// never hangs on a database another process holds. Default 1s.
	OpenTimeout time.Duration
	// ReadOnly opens an existing file without write access and writes
	// nothing to it (admin checks of a data directory or a backup): a
	// missing file is an error wrapping fs.ErrNotExist, and a file that
	// lacks a bucket (written by an older sealbox) is refused, since only a
	// writer can add it.
	ReadOnly bool
	// MaxBatchSize and MaxBatchDelay tune the group commit of lifecycle ops
	// (bbolt's Batch): concurrent ops share one transaction and its fsyncs.
	// A batch commits when it holds MaxBatchSize ops or MaxBatchDelay after
	// its first op arrived, whichever comes first. bbolt's own defaults
	// (1000, 10ms) suit thousands of writers: with a few dozen, no batch
	// ever fills and every op waits the whole delay. Defaults 64 and 2ms.
	MaxBatchSize  int
	MaxBatchDelay time.Duration
	// Version is the sealbox version recorded as the last to open the store
	// for writing.
	Version string
	// NoMigrate refuses a store of an older format (ErrNeedsMigration)
	// instead of migrating it.
	NoMigrate bool
	// BeforeMigrate, when set, is told which migrations are about to run
	// and from which format, before the first one starts.
	BeforeMigrate func(from int, pending []Migration)
}

// Store wraps the bbolt database. It is safe for concurrent use.
type Store struct {
	// rerun is the retry test mode (RerunUpdatesForTests), fixed at Open.
	rerun bool
	db    *bolt.DB
	now   func() time.Time
	// opWriters counts lifecycle ops inside ApplyOp, so a lone op commits
	// at once instead of waiting MaxBatchDelay for company (commitOp).
	opWriters atomic.Int64
}

// ErrLocked reports that another process holds the database file.
var ErrLocked = errors.New("the database is in use by another process")

// Open opens (creating if needed) the bbolt file at path and ensures every
// bucket exists.
func Open(path string, opts Options) (*Store, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.OpenTimeout <= 0 {
		opts.OpenTimeout = time.Second
	}
	if opts.MaxBatchSize <= 0 {
		opts.MaxBatchSize = 64
	}
	if opts.MaxBatchDelay <= 0 {
		opts.MaxBatchDelay = 2 * time.Millisecond
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: opts.OpenTimeout, ReadOnly: opts.ReadOnly})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, ErrLocked
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	db.MaxBatchSize = opts.MaxBatchSize
	db.MaxBatchDelay = opts.MaxBatchDelay
	s := &Store{db: db, now: opts.Now, rerun: rerunUpdates.Load()}
	if err := s.prepare(path, opts); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// prepare checks the store's format before anything is written, so a store
// that is refused is left exactly as it was; then a writer migrates it,
// creates any missing bucket and records the format and its own version.
func (s *Store) prepare(path string, opts Options) error {
	var f storeFormat
	if err := s.db.View(func(tx *bolt.Tx) (err error) { f, err = readFormat(tx); return err }); err != nil {
		return err
	}
	pending, err := pendingMigrations(path, f)
	if err != nil {
		return err
	}
	if len(pending) > 0 && (opts.ReadOnly || opts.NoMigrate) {
		return fmt.Errorf("%w: %s has store format %d and this sealbox writes format %d (%s): back it up, then start sealbox serve on it once, without --no-migrate, to migrate it",
			ErrNeedsMigration, path, f.version, FormatVersion, describeMigrations(pending))
	}
	if opts.ReadOnly {
		return s.db.View(func(tx *bolt.Tx) error {
			for _, name := range allBuckets {
				if tx.Bucket(name) == nil {
					return fmt.Errorf("store %s has no %s bucket: start sealbox serve on it once to bring it up to date", path, name)
				}
			}
			return nil
		})
	}
	err = s.update(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		if f.fresh {
			return writeFormat(tx, FormatVersion)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("create buckets: %w", err)
	}
	if len(pending) > 0 {
		if opts.BeforeMigrate != nil {
			opts.BeforeMigrate(f.version, pending)
		}
		if err := s.migrate(pending); err != nil {
			return err
		}
	}
	return s.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(metaOpenedBy, []byte(opts.Version))
	})
}

// rerunUpdates is the retry test mode for stores opened from now on.
var rerunUpdates atomic.Bool

// RerunUpdatesForTests turns the retry test mode on or off for stores
// opened afterwards. In it, every update function runs twice: once in a
// transaction that is then rolled back, then for real. A backend with
// serializable transactions (PostgreSQL) retries a function on conflict, so
// a function must leave nothing from a run that did not commit: no result
// set on one path and kept on another. The kv and server suites pass in this
// mode (SEALBOX_TEST_RERUN=1, run by .ci/run). Production never sets it.
func RerunUpdatesForTests(on bool) { rerunUpdates.Store(on) }

// errRolledBack ends the first run of an update in the retry test mode.
var errRolledBack = errors.New("kv: rolled back (retry test mode)")

// update runs fn in a read-write transaction; fn may run more than once
// (see RerunUpdatesForTests) and must set its results on every run.
func (s *Store) update(fn func(*bolt.Tx) error) error {
	if s.rerun {
		err := s.db.Update(func(tx *bolt.Tx) error {
			if err := fn(tx); err != nil {
				return err
			}
			return errRolledBack
		})
		if !errors.Is(err, errRolledBack) {
			return err
		}
	}
	return s.db.Update(fn)
}

// getRecord decodes the record under key in bucket, or returns nil, nil
// when there is none: the one shape of every typed lookup.
func getRecord[T any](tx *bolt.Tx, bucket, key []byte) (*T, error) {
	b := tx.Bucket(bucket).Get(key)
	if b == nil {
		return nil, nil
	}
	rec := new(T)
	if err := decode(b, rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// scanPrefix calls fn with every key of b that starts with prefix, and its
// value, in key order, and stops at fn's first error, which it returns. It
// is the one way a record's index is read: a bounded scan, never the whole
// bucket. fn must not write to b; k and v are valid only during the call.
func scanPrefix(b *bolt.Bucket, prefix []byte, fn func(k, v []byte) error) error {
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}

// commitThenRefuse runs fn in an update whose writes stand even when fn
// refuses the caller: a refusal that must leave a trace (a spent challenge,
// a counted wrong code, a revoked lineage) commits, then is returned. fn
// returns the refusal, or an error, which rolls everything back. The
// refusal is fn's result on its last run only, as every result must be.
func (s *Store) commitThenRefuse(fn func(tx *bolt.Tx) (refusal, err error)) error {
	var refusal error
	err := s.update(func(tx *bolt.Tx) (err error) {
		refusal, err = fn(tx)
		return err
	})
	if err != nil {
		return err
	}
	return refusal
}

// Close closes the database; pending transactions finish first.
func (s *Store) Close() error { return s.db.Close() }

// Now is the store's clock.
func (s *Store) Now() time.Time { return s.now() }

// Path is the database file's path.
func (s *Store) Path() string { return s.db.Path() }

// HashToken is the only form in which a bearer secret (access, refresh,
// challenge, code, handle) reaches the store: the token itself is never
// written.
func HashToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// Every record is CBOR of a private record struct, so storage tags never leak
// into the domain types. Times are written with every nanosecond (RFC 3339
// text): keys hold fixed-width nanoseconds (timeKey) and are rebuilt from
// decoded records to delete or rewrite them, so a time that lost precision in
// the record would name a key that does not exist and leave the old one
// behind — a revoked session's index entry, or a session listed twice after a
// rewrite.
var (
	encMode, _ = func() cbor.EncOptions {
		o := cbor.CoreDetEncOptions()
		o.Time = cbor.TimeRFC3339Nano
		return o
	}().EncMode()
	decMode, _ = cbor.DecOptions{}.DecMode()
)

func encode(v any) []byte {
	b, err := encMode.Marshal(v)
	if err != nil {
		// Only programming errors (an unsupported type) reach here.
		panic(fmt.Sprintf("kv: encode %T: %v", v, err))
	}
	return b
}

// decode unmarshals a stored record. bbolt bytes are valid only inside their
// transaction; decoding copies them.
func decode(b []byte, v any) error {
	if err := decMode.Unmarshal(b, v); err != nil {
		return fmt.Errorf("kv: corrupt %T record: %w", v, err)
	}
	return nil
}

// u64 encodes n as 8 big-endian bytes, so numeric keys sort correctly.
func u64(n uint64) []byte {
	var b [8]byte
	for i := 7; i >= 0; i-- {
		b[i] = byte(n)
		n >>= 8
	}
	return b[:]
}

func readU64(b []byte) uint64 {
	var n uint64
	for _, c := range b[:8] {
		n = n<<8 | uint64(c)
	}
	return n
}

// timeKey is a time as fixed-width big-endian Unix nanoseconds.
func timeKey(t time.Time) []byte { return u64(uint64(t.UnixNano())) }

func join(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// idPart is a string id as the leading part of a composite key. The store
// takes ids of any length, so a 0x00 terminator keeps one id from being a
// prefix of another ("acct-1" of "acct-10") in a prefix scan.
func idPart(id string) []byte { return append([]byte(id), 0) }

// member is the value of a key that only records membership in a set. bbolt's
// Get answers nil for an empty value inside a write transaction, so members
// hold one byte and Get reliably tells present from absent.
var member = []byte{1}

// copyBytes copies a value read inside a transaction so it outlives it.
func copyBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

// Ping reports whether the store answers a read transaction.
func (s *Store) Ping() error {
	return s.db.View(func(*bolt.Tx) error { return nil })
}
