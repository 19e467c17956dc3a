package kv

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// FormatVersion is the layout of the store this build reads and writes. A
// store records its format in the meta bucket; one written before formats
// were recorded (no meta bucket) is format 0. Every change of layout adds one
// entry to migrations and raises FormatVersion by one.
const FormatVersion = 8

var (
	bucketMeta = []byte("meta")
	// metaFormat holds the store's format as decimal text.
	metaFormat = []byte("format")
	// metaOpenedBy holds the version of the sealbox that last opened the
	// store for writing.
	metaOpenedBy = []byte("opened_by")
)

// A Migration brings a store from format To-1 to To in one transaction: a
// store is never left between two formats.
type Migration struct {
	To   int
	Name string
	// apply may run against any store of format To-1 (bbolt runs it once;
	// it sets nothing outside the transaction).
	apply func(tx Tx, now time.Time) error
}

// migrations, in order; migrations[i].To == i+1.
var migrations = []Migration{
	{To: 1, Name: "account keys in the session index and the cohorts are length-safe", apply: migrateAccountKeys},
	{To: 2, Name: "the transparency log records every directory already published", apply: migrateLogDirectories},
	{To: 3, Name: "the store-wide blob totals are kept in shards", apply: migrateShardTotals},
	{To: 4, Name: "leases and password verifications in flight are kept in the store, for many nodes", apply: migrateLeases},
	{To: 5, Name: "sign-in challenges and upload sessions are indexed by account; refresh chains and wrong second-factor codes are kept; revoked links are swept", apply: migrateFormat5},
	{To: 6, Name: "small blobs are kept inline in the store; the blob files at or under the inline threshold move in after the step", apply: migrateInline},
	{To: 7, Name: "share links are indexed by account with their count of served blobs, for the caps on them", apply: migrateSharesByAccount},
	{To: 8, Name: "invitations to register are kept in the store; blobs are indexed by holder and by the assets that name them", apply: migrateFormat8},
}

// ErrFormatTooNew reports a store written by a newer sealbox. Nothing was
// written to it.
var ErrFormatTooNew = errors.New("the store was written by a newer sealbox")

// ErrNeedsMigration reports a store of an older format opened read-only or
// with Options.NoMigrate. Nothing was written to it.
var ErrNeedsMigration = errors.New("the store needs a migration")

// storeFormat is what a store says of itself before Open changes anything.
type storeFormat struct {
	version  int
	openedBy string
	// fresh is an empty file: it takes the current format without
	// migrations.
	fresh bool
}

// readFormat reads the store's format; existing names its buckets. A store
// with no format record is format 0, or fresh when it has no accounts
// bucket either. That includes a meta bucket without the record: a new
// store's buckets are created in one transaction and its format written in
// the next, so a crash between the two leaves exactly that, with every
// bucket empty, and the migrations from format 0 bring it up to date.
func (s *Store) readFormat(existing map[string]bool) (storeFormat, error) {
	unrecorded := storeFormat{fresh: !existing[string(bucketAccounts)]}
	if !existing[string(bucketMeta)] {
		return unrecorded, nil
	}
	var f storeFormat
	err := s.view(func(tx Tx) error {
		meta := tx.Bucket(bucketMeta)
		format, err := meta.Get(metaFormat)
		if err != nil {
			return err
		}
		if format == nil {
			f = unrecorded
			return nil
		}
		if f.version, err = strconv.Atoi(string(format)); err != nil || f.version < 0 {
			return fmt.Errorf("kv: the store's format record %q is not a version", format)
		}
		openedBy, err := meta.Get(metaOpenedBy)
		f.openedBy = string(openedBy)
		return err
	})
	return f, err
}

// pendingMigrations lists the migrations a store of format f needs, or
// refuses a store newer than this build.
func pendingMigrations(path string, f storeFormat) ([]Migration, error) {
	if f.fresh {
		return nil, nil
	}
	if f.version > FormatVersion {
		by := f.openedBy
		if by == "" {
			by = "an unknown version"
		}
		return nil, fmt.Errorf("%w: %s has store format %d (last opened by sealbox %s); this sealbox understands formats up to %d: run the newer sealbox, or restore a backup taken before the upgrade",
			ErrFormatTooNew, path, f.version, by, FormatVersion)
	}
	return migrations[f.version:], nil
}

// describeMigrations names each migration, for messages.
func describeMigrations(ms []Migration) string {
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = fmt.Sprintf("%d: %s", m.To, m.Name)
	}
	return strings.Join(names, "; ")
}

// migrate runs the pending migrations, one transaction each, recording the
// new format in the same transaction as the change. Each transaction reads
// the format again and skips a step already recorded: nodes that start on
// one PostgreSQL store at once all find it old, and a migration must run
// once, not once per node (their transactions are serializable, so the
// later ones see the first's record).
func (s *Store) migrate(pending []Migration) error {
	for _, m := range pending {
		err := s.update(func(tx Tx) error {
			format, err := tx.Bucket(bucketMeta).Get(metaFormat)
			if err != nil {
				return err
			}
			if v, err := strconv.Atoi(string(format)); err == nil && v >= m.To {
				return nil
			}
			if err := m.apply(tx, s.now()); err != nil {
				return err
			}
			return writeFormat(tx, m.To)
		})
		if err != nil {
			return fmt.Errorf("migration to store format %d (%s): %w", m.To, m.Name, err)
		}
	}
	return nil
}

func writeFormat(tx Tx, version int) error {
	return tx.Bucket(bucketMeta).Put(metaFormat, []byte(strconv.Itoa(version)))
}

// Format reports the store's format and the version of the sealbox that last
// opened it for writing.
func (s *Store) Format() (version int, openedBy string, err error) {
	existing, err := s.engine.Buckets()
	if err != nil {
		return 0, "", err
	}
	f, err := s.readFormat(existing)
	return f.version, f.openedBy, err
}

// migrateAccountKeys (format 0 to 1): the session index and the cohorts
// joined the bare account id with the rest of the key, so a prefix scan for
// one account could see another whose id extends it. Both now lead with
// idPart. The session index is rebuilt from the sessions themselves. A
// cohort key names no account in its value; every account id a sealbox ever
// minted is a 36-byte UUID, so the old key splits there, and a key whose first
// 36 bytes name no account is dropped (a cohort is an advisory sighting).
func migrateAccountKeys(tx Tx, _ time.Time) error {
	index := tx.Bucket(bucketSessionsByAccount)
	if err := clearBucket(index); err != nil {
		return err
	}
	err := scanPages(tx.Bucket(bucketSessions), func(id, v []byte) error {
		var rec sessionRecord
		if err := decode(v, &rec); err != nil {
			return err
		}
		return index.Put(sessionIndexKey(rec.AccountID, rec.CreatedAt.Time(), string(id)), nil)
	})
	if err != nil {
		return err
	}
	type cohort struct{ key, value []byte }
	var old []cohort
	cohorts := tx.Bucket(bucketCohorts)
	err = scanPages(cohorts, func(k, v []byte) error {
		old = append(old, cohort{copyBytes(k), copyBytes(v)})
		return nil
	})
	if err != nil {
		return err
	}
	if err := clearBucket(cohorts); err != nil {
		return err
	}
	const uuidLen = 36
	for _, c := range old {
		if len(c.key) <= uuidLen {
			continue
		}
		if known, err := has(tx, bucketAccounts, c.key[:uuidLen]); err != nil {
			return err
		} else if !known {
			continue
		}
		if err := cohorts.Put(cohortKey(string(c.key[:uuidLen]), string(c.key[uuidLen:])), c.value); err != nil {
			return err
		}
	}
	return nil
}

// migrateLogDirectories (format 1 to 2): the transparency log starts with
// one record for each directory stored before it existed, in account id
// order, so every stored directory has a log index. Earlier versions of a
// directory were replaced before the log existed and cannot be logged.
func migrateLogDirectories(tx Tx, _ time.Time) error {
	dirs := tx.Bucket(bucketDirectories)
	type entry struct{ id, value []byte }
	var all []entry
	if err := scanPages(dirs, func(k, v []byte) error {
		all = append(all, entry{copyBytes(k), copyBytes(v)})
		return nil
	}); err != nil {
		return err
	}
	for _, e := range all {
		var rec directoryRecord
		if err := decode(e.value, &rec); err != nil {
			return err
		}
		index, err := appendLog(tx, DirectoryLogRecord(string(e.id), rec.Version, rec.Bytes, rec.IdentityKey))
		if err != nil {
			return err
		}
		rec.LogIndex = index
		if err := dirs.Put(e.id, encode(&rec)); err != nil {
			return err
		}
	}
	return nil
}

// migrateShardTotals (format 2 to 3): the two store-wide rows "blobs" and
// "blob_bytes" become the sharded rows BlobTotals sums, recomputed from the
// blob records themselves so the shards agree with them exactly.
func migrateShardTotals(tx Tx, _ time.Time) error {
	if err := clearBucket(tx.Bucket(bucketTotals)); err != nil {
		return err
	}
	return scanPages(tx.Bucket(bucketBlobs), func(hash, v []byte) error {
		var rec blobRecord
		if err := decode(v, &rec); err != nil {
			return err
		}
		return addBlobTotals(tx, string(hash), 1, rec.Size)
	})
}

// migrateLeases (format 3 to 4): the leases and password_attempts buckets
// join the store. Open creates every missing bucket before migrating, and
// both start empty (nothing held, nothing in flight), so the step has
// nothing to write but the format: a sealbox that knows neither bucket
// refuses the store instead of running beside nodes that take leases it
// would not respect.
func migrateLeases(Tx, time.Time) error { return nil }

// migrateInline (format 5 to 6): the inline_blobs bucket joins the store
// (Open creates it) and a blob record may say its bytes are inline. Every
// existing record is a file's, so the step writes nothing but the format.
// Moving the existing small files in needs the blob engine, which kv does
// not know, and more than one transaction: the caller runs MoveInline
// after Open, a batch per transaction, resumable and safe to cut short. A
// sealbox of format 5 refuses the store afterwards, as it would not read
// inline blobs.
func migrateInline(Tx, time.Time) error { return nil }

// migrateSharesByAccount (format 6 to 7) lists every link record under its
// account in shares_by_account, with the count of blobs it serves, so the
// caps of ShareLimits count the links made before them too.
func migrateSharesByAccount(tx Tx, _ time.Time) error {
	type link struct {
		key, entryKey []byte
		entry         shareEntry
	}
	// Collected first: a bucket is not written while it is scanned.
	var links []link
	err := scanPages(tx.Bucket(bucketShares), func(key, v []byte) error {
		var rec shareRecord
		if err := decode(v, &rec); err != nil {
			return err
		}
		links = append(links, link{
			key: bytes.Clone(key), entryKey: shareEntryKey(rec.AccountID, key),
			entry: shareEntry{ExpiresAt: rec.ExpiresAt, RevokedAt: rec.RevokedAt},
		})
		return nil
	})
	for i := 0; i < len(links) && err == nil; i++ {
		l := &links[i]
		err = scanPrefix(tx.Bucket(bucketShareBlobs), l.key, func(_, _ []byte) error {
			l.entry.Serves++
			return nil
		})
		if err == nil {
			err = tx.Bucket(bucketSharesByAccount).Put(l.entryKey, encode(&l.entry))
		}
	}
	return err
}

// migrateFormat8 (format 7 to 8): the invites and invites_by_code buckets
// join the store empty (Open creates them), and two indexes are built from
// what the store holds: every holding under its blob (blob_holders), so
// deleting an account tells the blobs nobody else holds, and every blob an
// op names under its asset (asset_blobs, blob_refs), so a purged photo
// releases what only it named. Deleting an account ends its links through
// shares_by_account, which format 7 built. One transaction, like every
// step: a crash leaves format 7 and the step runs again in full (its puts
// are idempotent). A sealbox of format 7 refuses the store afterwards, as it
// would neither keep the indexes nor honour invitations.
func migrateFormat8(tx Tx, _ time.Time) error {
	holders := tx.Bucket(bucketBlobHolders)
	err := scanPages(tx.Bucket(bucketHoldings), func(k, _ []byte) error {
		i := bytes.IndexByte(k, 0)
		if i < 0 {
			return fmt.Errorf("kv: a holding key without its account part: %x", k)
		}
		return holders.Put(holderKey(string(k[i+1:]), string(k[:i])), member)
	})
	if err != nil {
		return err
	}
	return migrateAssetBlobs(tx)
}

// migrateAssetBlobs names, for every op in every feed, the blobs the op
// named under its asset (nameBlob), as ApplyOp does from format 7 on.
func migrateAssetBlobs(tx Tx) error {
	owners := map[string]string{}
	return scanPages(tx.Bucket(bucketFeed), func(k, v []byte) error {
		i := bytes.IndexByte(k, 0)
		if i < 0 || len(k) != i+9 {
			return fmt.Errorf("kv: a feed key that is not album|sync_seq: %x", k)
		}
		albumID := string(k[:i])
		owner, ok := owners[albumID]
		if !ok {
			a, err := getAlbum(tx, albumID)
			if err != nil || a == nil {
				return cmp.Or(err, fmt.Errorf("kv: the feed of album %s, which has no record", albumID))
			}
			owner, owners[albumID] = a.OwnerID, a.OwnerID
		}
		e, err := decodeFeedEntry(readU64(k[i+1:]), v)
		if err != nil {
			return err
		}
		for _, hash := range []string{e.ManifestHash, e.CiphertextHash, e.MetadataBlobHash, e.OriginalBlobHash} {
			if err := nameBlob(tx, owner, albumID, e.AssetID, hash); err != nil {
				return err
			}
		}
		return nil
	})
}

// migrateFormat5 (format 4 to 5) indexes the pending sign-in challenges and
// the open upload sessions by account and dates the revoked links, in one
// transaction like every step, so a crash leaves format 4 and the step runs
// again in full.
func migrateFormat5(tx Tx, now time.Time) error {
	if err := migrateChallengeIndex(tx); err != nil {
		return err
	}
	if err := migrateUploadsByAccount(tx); err != nil {
		return err
	}
	return dateRevokedShares(tx, now)
}

// dateRevokedShares: before format 5 a revoked link kept its record for
// good, with no revocation time and no sweep entry. Each is dated now, the
// migration's time, and swept revokedShareKeep later (to a tombstone), as a
// link revoked now would be; one whose own expiry comes first is deleted
// then, by the expiry entry it already has.
func dateRevokedShares(tx Tx, now time.Time) error {
	shares := tx.Bucket(bucketShares)
	// Collected first: a bucket is not written while it is scanned.
	var undated [][]byte
	err := scanPages(shares, func(key, v []byte) error {
		var rec shareRecord
		if err := decode(v, &rec); err != nil {
			return err
		}
		if rec.Revoked && rec.RevokedAt.IsZero() {
			undated = append(undated, bytes.Clone(key))
		}
		return nil
	})
	for _, key := range undated {
		if err != nil {
			break
		}
		err = dateRevokedShare(tx, key, now)
	}
	return err
}

func dateRevokedShare(tx Tx, key []byte, now time.Time) error {
	rec, err := getShare(tx, key)
	if err != nil {
		return err
	}
	rec.RevokedAt = now
	if err := tx.Bucket(bucketShares).Put(key, encode(rec)); err != nil {
		return err
	}
	if sweepAt := now.Add(revokedShareKeep); rec.ExpiresAt.IsZero() || sweepAt.Before(rec.ExpiresAt) {
		return putExpiry(tx, sweepAt, kindShare, key)
	}
	return nil
}

// migrateChallengeIndex (part of format 4 to 5): the pending sign-in
// challenges are indexed by account (so whatever ends an account's credentials ends them
// too), and the refresh_chains and totp_attempts buckets join the store,
// empty: sessions opened before carry no chain and keep refreshing through
// the refresh token index as before.
func migrateChallengeIndex(tx Tx) error {
	index := tx.Bucket(bucketMFAChallengesByAccount)
	return scanPages(tx.Bucket(bucketMFAChallenges), func(key, v []byte) error {
		var ch mfaChallengeRecord
		if err := decode(v, &ch); err != nil {
			return err
		}
		return index.Put(join(idPart(ch.AccountID), key), member)
	})
}

// migrateUploadsByAccount (part of format 4 to 5): the uploads_by_account index
// joins the store, filled from the sessions already open, so the cap on an
// account's open sessions counts them too.
func migrateUploadsByAccount(tx Tx) error {
	return scanPages(tx.Bucket(bucketUploads), func(key, v []byte) error {
		var rec uploadRecord
		if err := decode(v, &rec); err != nil {
			return err
		}
		return tx.Bucket(bucketUploadsByAccount).Put(uploadAccountKey(rec.AccountID, key), timeKey(rec.ExpiresAt))
	})
}
