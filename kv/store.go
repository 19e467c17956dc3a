// Package kv is sealbox's store: every record except blob bytes, kept in an
// ordered key-value Engine (one bbolt file by default). Each exported method
// runs exactly one serializable transaction, so every check-and-write it
// performs is atomic. kv knows nothing about HTTP.
package kv

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"sealbox/kv/engine"
	"sealbox/kv/fault"

	"github.com/fxamacker/cbor/v2"
)

// Bucket names, each declared once, by newBucket. All are created at Open,
// so transactions may assume them.
var (
	bucketAccounts          = newBucket("accounts")
	bucketAccountsByEmail   = newBucket("accounts_by_email")
	bucketSessions          = newBucket("sessions")
	bucketSessionsByAccount = newBucket("sessions_by_account")
	bucketAccessTokens      = newBucket("access_tokens")
	bucketRefreshTokens     = newBucket("refresh_tokens")
	bucketSpentRefresh      = newBucket("spent_refresh")
	bucketLockouts          = newBucket("lockouts")
	bucketMFAChallenges     = newBucket("mfa_challenges")
	bucketCohorts           = newBucket("cohorts")
	bucketExpiry            = newBucket("expiry")
	bucketAlbums            = newBucket("albums")
	bucketAlbumsByAccount   = newBucket("albums_by_account")
	bucketBlobs             = newBucket("blobs")
	bucketHoldings          = newBucket("holdings")
	bucketUploads           = newBucket("uploads")
	bucketUploadsByAlbum    = newBucket("uploads_by_album")
	bucketUploadsByAccount  = newBucket("uploads_by_account")
	bucketUploadBlobs       = newBucket("upload_blobs")
	bucketUsage             = newBucket("usage")
	bucketTotals            = newBucket("totals")
	bucketEscrow            = newBucket("escrow")
	bucketDirectories       = newBucket("directories")
	bucketRevokeChallenges  = newBucket("revoke_challenges")
	bucketEnrollCodes       = newBucket("enroll_codes")
	bucketEnrollFallbacks   = newBucket("enroll_fallbacks")
	bucketRelayChannels     = newBucket("relay_channels")
	bucketRelayMailboxes    = newBucket("relay_mailboxes")
	bucketShares            = newBucket("shares")
	bucketShareBlobs        = newBucket("share_blobs")
	bucketAssets            = newBucket("assets")
	bucketAppliedManifests  = newBucket("applied_manifests")
	bucketFeed              = newBucket("feed")
	bucketUpgrades          = newBucket("upgrades")
	bucketTombstones        = newBucket("tombstones")

	bucketTransfers          = newBucket("transfers")
	bucketTransfersByUpload  = newBucket("transfers_by_upload")
	bucketTransfersByAccount = newBucket("transfers_by_account")
	bucketTransferRemovals   = newBucket("transfer_removals")

	bucketLeases           = newBucket("leases")
	bucketPasswordAttempts = newBucket("password_attempts")

	// mfa_challenges_by_account: idPart(account)|challenge hash, so every
	// pending sign-in of an account can be ended at once.
	bucketMFAChallengesByAccount = newBucket("mfa_challenges_by_account")
	bucketTOTPAttempts           = newBucket("totp_attempts")
	bucketRefreshChains          = newBucket("refresh_chains")
	bucketShareTombstones        = newBucket("share_tombstones")
	bucketRelayChannelsByAccount = newBucket("relay_channels_by_account")
	bucketInlineBlobs            = newBucket("inline_blobs")
	// shares_by_account: idPart(account)|SHA-256(opaque id) -> shareEntry,
	// every link record the account has, so its caps read them by one
	// prefix scan.
	bucketSharesByAccount = newBucket("shares_by_account")

	// invites: id -> inviteRecord; invites_by_code: the code's SHA-256 -> id.
	bucketInvites       = newBucket("invites")
	bucketInvitesByCode = newBucket("invites_by_code")
	// blob_holders: hash|accountID -> member, the holdings by blob, so
	// releasing one tells whether any other account still holds it.
	bucketBlobHolders = newBucket("blob_holders")
	// asset_blobs: assetKey|hash -> member, every blob an op of the asset's
	// chain names; blob_refs: idPart(accountID)|hash -> how many of the
	// account's assets name it (8 bytes). A deleted asset's purge releases
	// the blobs no other asset of the account names.
	bucketAssetBlobs = newBucket("asset_blobs")
	bucketBlobRefs   = newBucket("blob_refs")
)

// domainBuckets is every bucket newBucket declared, in declaration order:
// all but the meta bucket.
var domainBuckets [][]byte

// newBucket declares the bucket name: it returns the name and lists it in
// domainBuckets, so no bucket is left out of what Open creates and what a
// backup copies.
func newBucket(name string) []byte {
	b := []byte(name)
	domainBuckets = append(domainBuckets, b)
	return b
}

// storeBuckets is every bucket a store has: the meta bucket (its format),
// then the domain's.
func storeBuckets() [][]byte { return append([][]byte{bucketMeta}, domainBuckets...) }

// Options tune a Store. Zero values take the defaults.
type Options struct {
	// Now is the clock; every transaction reads it once. Default time.Now.
	Now func() time.Time
	// Ticker makes the ticks a self-renewing Lease renews itself on, every
	// d, and the function that stops them; tests tick by hand. Default
	// time.NewTicker's.
	Ticker func(d time.Duration) (ticks <-chan time.Time, stop func())
	// ReadOnly writes nothing to the store (admin checks of a data
	// directory or a backup; the engine is opened read-only too). A store
	// of an older format is read through a migrated copy in a temporary
	// directory (openMigratedCopy, which needs ScratchEngine), never
	// migrated in place; a store of this format that lacks a bucket is
	// refused, since only a writer can add it.
	ReadOnly bool
	// ScratchEngine opens a new engine file at path that can write itself
	// out (engine.Snapshotter), which nothing needs after a crash: the
	// snapshot of an engine without a file of its own (PostgreSQL) is
	// assembled in one (WriteSnapshot). Nil: such a store has no snapshot.
	ScratchEngine func(path string) (Engine, error)
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

// Store is sealbox's record store over one Engine. It is safe for
// concurrent use.
type Store struct {
	// rerun is the retry test mode (RerunUpdatesForTests), fixed at open.
	rerun  bool
	engine Engine
	now    func() time.Time
	ticker func(time.Duration) (<-chan time.Time, func())
	// batchedWriters counts the callers inside commitBatched, so a lone one
	// commits at once instead of waiting the batch delay for company.
	batchedWriters atomic.Int64
	// where names the store in messages (the bbolt file's path).
	where string

	// exclusive is set on an engine this process alone writes
	// (engine.Exclusive).
	exclusive bool
	// The caches of the hottest reads (readCache), on an exclusive engine
	// only: nil elsewhere, where other processes write too.
	writes       writeGen
	sessionCache *readCache[*Session]
	shareCache   *readCache[shareBlobRead]
	accountCache *readCache[*Account]
	// snapshot writes the store's snapshot (see WriteSnapshot).
	snapshot func(io.Writer) (int64, error)
	// attempts keeps the password verifications in flight.
	attempts attemptLedger

	// original is the engine of an older format a read-only store is
	// copied from (openMigratedCopy), and scratchDir holds the migrated
	// copy it reads; both are unset for any other store.
	original   Engine
	scratchDir string
}

// ErrLocked reports that another process holds the database file
// (engine.ErrLocked).
var ErrLocked = engine.ErrLocked

// OpenEngine opens the store held by e, which where names in messages,
// ensuring every bucket exists. The store owns e from then on: it is closed
// with the store, or at once when opening fails.
func OpenEngine(e Engine, where string, opts Options) (*Store, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := newStore(e, where, opts)
	if err := s.prepare(opts); err != nil {
		if opts.ReadOnly && opts.ScratchEngine != nil && errors.Is(err, ErrNeedsMigration) {
			copied, err := openMigratedCopy(e, where, opts)
			if err != nil {
				e.Close()
			}
			return copied, err
		}
		e.Close()
		return nil, err
	}
	return s, nil
}

// newStore makes the store over e, choosing once the strategies that depend
// on the engine's abilities.
func newStore(e Engine, where string, opts Options) *Store {
	s := &Store{engine: e, now: opts.Now, ticker: opts.Ticker, rerun: rerunUpdates.Load(), where: where}
	if s.ticker == nil {
		s.ticker = realTicker
	}
	if _, s.exclusive = e.(engine.Exclusive); s.exclusive {
		s.sessionCache, s.shareCache = &readCache[*Session]{}, &readCache[shareBlobRead]{}
		s.accountCache = &readCache[*Account]{}
	}
	s.attempts = newAttemptLedger(s, e)
	s.snapshot = s.snapshotStrategy(e, opts.ScratchEngine)
	return s
}

// prepare checks the store's format before anything is written, so a store
// that is refused is left exactly as it was; then a writer migrates it,
// creates any missing bucket and records the format and its own version.
func (s *Store) prepare(opts Options) error {
	existing, err := s.engine.Buckets()
	if err != nil {
		return err
	}
	f, err := s.readFormat(existing)
	if err != nil {
		return err
	}
	pending, err := pendingMigrations(s.where, f)
	if err != nil {
		return err
	}
	if len(pending) > 0 && (opts.ReadOnly || opts.NoMigrate) {
		return fmt.Errorf("%w: %s has store format %d and this sealbox writes format %d (%s): back it up with this sealbox (`sealbox backup DEST` and `sealbox check` read an older store without changing it), then start sealbox serve on it once, without --no-migrate, to migrate it",
			ErrNeedsMigration, s.where, f.version, FormatVersion, describeMigrations(pending))
	}
	if opts.ReadOnly {
		for _, name := range domainBuckets {
			if !existing[string(name)] {
				return fmt.Errorf("store %s has no %s bucket: start sealbox serve on it once to bring it up to date", s.where, name)
			}
		}
		return nil
	}
	if err := s.engine.CreateBuckets(storeBuckets()); err != nil {
		return fmt.Errorf("create buckets: %w", err)
	}
	if f.fresh {
		if err := s.update(func(tx Tx) error { return writeFormat(tx, FormatVersion) }); err != nil {
			return err
		}
	}
	if len(pending) > 0 {
		if opts.BeforeMigrate != nil {
			opts.BeforeMigrate(f.version, pending)
		}
		if err := s.migrate(pending); err != nil {
			return err
		}
	}
	return s.update(func(tx Tx) error {
		if s.exclusive {
			// One process holds this engine at a time (bbolt's file lock),
			// so every lease and verification in flight found now was a
			// process's that is gone: a transfer its crash left claimed
			// resumes at once instead of after the lease's ttl. On a
			// networked engine they may be live nodes', and lapse instead.
			for _, b := range [][]byte{bucketLeases, bucketPasswordAttempts} {
				if err := clearBucket(tx.Bucket(b)); err != nil {
					return err
				}
			}
		}
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
func (s *Store) update(fn func(Tx) error) error {
	defer s.wrote()
	if s.rerun {
		err := s.engine.Update(func(tx Tx) error {
			if err := fn(tx); err != nil {
				return err
			}
			return errRolledBack
		})
		if !errors.Is(err, errRolledBack) {
			return err
		}
	}
	return s.engine.Update(fn)
}

// view runs fn in a read-only transaction.
func (s *Store) view(fn func(Tx) error) error { return s.engine.View(fn) }

// readOne reads bucket's value under key: in one exchange on an engine
// that can read it with one statement (engine.StatementReader), else in a
// view. The slice is the caller's.
func (s *Store) readOne(bucket, key []byte) (v []byte, err error) {
	if r, ok := s.engine.(engine.StatementReader); ok {
		return r.ReadOne(bucket, key)
	}
	err = s.view(func(tx Tx) error {
		b, err := tx.Bucket(bucket).Get(key)
		v = copyBytes(b)
		return err
	})
	return v, err
}

// follow reads the value of target under the key that is index's value
// under key (nil when either has none), as of one state of the store: in
// one exchange on an engine that can read both with one statement
// (engine.StatementReader), else in a view. The slice is the caller's.
func (s *Store) follow(index, key, target []byte) (v []byte, err error) {
	if r, ok := s.engine.(engine.StatementReader); ok {
		return r.Follow(index, key, target)
	}
	err = s.view(func(tx Tx) error {
		v = nil
		ref, err := tx.Bucket(index).Get(key)
		if ref == nil || err != nil {
			return err
		}
		b, err := tx.Bucket(target).Get(ref)
		v = copyBytes(b)
		return err
	})
	return v, err
}

// getRecord decodes the record under key in bucket, or returns nil, nil
// when there is none: the one shape of every typed lookup.
func getRecord[T any](tx Tx, bucket, key []byte) (*T, error) {
	b, err := tx.Bucket(bucket).Get(key)
	if err != nil {
		return nil, err
	}
	return decodeRecord[T](b)
}

// decodeRecord decodes a record read, or returns nil, nil for none (nil).
func decodeRecord[T any](b []byte) (*T, error) {
	if b == nil {
		return nil, nil
	}
	rec := new(T)
	if err := decode(b, rec); err != nil {
		return nil, err
	}
	return rec, nil
}

// has reports whether bucket holds key.
func has(tx Tx, bucket, key []byte) (bool, error) {
	v, err := tx.Bucket(bucket).Get(key)
	return v != nil, err
}

// prefetch reads the keys keys lists in one exchange with the database
// when the engine's reads each cost one (engine.Prefetcher), so the Gets of
// them that follow cost none; on any other engine the list is not even
// made. It changes no answer: a key it misses is read by its Get.
func prefetch(tx Tx, keys func() []engine.Key) error {
	if p, ok := tx.(engine.Prefetcher); ok {
		return p.Prefetch(keys())
	}
	return nil
}

// commitBatched runs fn in one write transaction with concurrent callers'
// functions (Engine.Batch: a group commit), so many writers (lifecycle ops, relay posts) pay for one
// commit's fsyncs. A lone writer uses its own transaction at once: in a batch
// it would wait the engine's batch delay for writers that are not coming.
//
// fn returns a refusal, which must have written nothing, or an error. A
// refusal is returned to its caller alone: fn then returns nil to the batch,
// so one refused writer neither rolls back nor re-runs the others. An error
// fails the batch, and Batch re-runs its functions, so fn must be idempotent
// and set its results afresh on every run; the refusal returned is the one of
// its last run.
//
// reads lists keys fn will read (nil: none to name): an engine that reads a
// batch's keys together (engine.BatchReader) reads them with the other
// callers'. The list is made only then.
func (s *Store) commitBatched(reads func() []engine.Key, fn func(tx Tx) (refusal, err error)) error {
	var refusal error
	run := func(tx Tx) (err error) {
		refusal, err = fn(tx)
		return err
	}
	defer s.batchedWriters.Add(-1)
	alone := s.batchedWriters.Add(1) == 1 || s.rerun
	reader, readsTogether := s.engine.(engine.BatchReader)
	var err error
	switch {
	case alone:
		err = s.update(run)
	case readsTogether && reads != nil:
		err = reader.BatchReading(reads(), run)
		s.wrote()
	default:
		err = s.engine.Batch(run)
		s.wrote()
	}
	if err != nil {
		return err
	}
	return refusal
}

// asRefusal sorts an error of a check that writes nothing, for
// commitBatched: a *fault.Error refuses the caller alone; any other error
// fails the transaction.
func asRefusal(err error) (refusal, failure error) {
	var fe *fault.Error
	if errors.As(err, &fe) {
		return err, nil
	}
	return nil, err
}

// commitThenRefuse runs fn in an update whose writes stand even when fn
// refuses the caller: a refusal that must leave a trace (a spent challenge,
// a counted wrong code, a revoked lineage) commits, then is returned. fn
// returns the refusal, or an error, which rolls everything back. The
// refusal is fn's result on its last run only, as every result must be.
func (s *Store) commitThenRefuse(fn func(tx Tx) (refusal, err error)) error {
	var refusal error
	err := s.update(func(tx Tx) (err error) {
		refusal, err = fn(tx)
		return err
	})
	if err != nil {
		return err
	}
	return refusal
}

// Close closes the store and its engine; pending transactions finish first.
func (s *Store) Close() error { return errors.Join(s.engine.Close(), s.closeCopy()) }

// Now is the store's clock.
func (s *Store) Now() time.Time { return s.now() }

// Path is the database file's path, or the engine's name for one without a
// file.
func (s *Store) Path() string { return s.where }

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

// Ping reports whether the store answers a read: a transaction that reads
// nothing may never reach a database server (PostgreSQL's opens with its
// first statement), so it reads the format record.
func (s *Store) Ping() error {
	return s.view(func(tx Tx) error {
		_, err := tx.Bucket(bucketMeta).Get(metaFormat)
		return err
	})
}
