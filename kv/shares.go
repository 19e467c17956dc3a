package kv

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"fmt"
	"slices"
	"time"

	"sealbox/kv/fault"
)

// A share link is named by an opaque id its owner chose, which is the
// capability: whoever holds it may read the link. The store keys a link by
// the id's SHA-256 and never writes the id itself, so a copy of the database
// does not yield working links.
//
//   - shares:      SHA-256(opaque id) -> shareRecord
//   - share_blobs: SHA-256(opaque id)|hash -> member: the blobs the link
//     serves, so a blob read is a point lookup and never decodes a list of up
//     to 10,000 hashes.
//
//   - share_tombstones: SHA-256(opaque id) -> shareTombstone: the ids of
//     revoked links swept from shares, which stay taken.
//
//   - shares_by_account: idPart(account)|SHA-256(opaque id) -> shareEntry:
//     each link record of the account, with its count of served blobs, so
//     the account's caps (ShareLimits) read its links by one prefix scan
//     and never decode a record.
//
// A revoked link keeps its record (owner and digest, nothing to serve)
// for revokedShareKeep, so a delayed retry of its registration is recognised
// and refused; then the sweep replaces it by a tombstone of a few bytes,
// which still refuses the id, so the old link never comes back. A link with
// an expiry is deleted, revoked or not, by the sweep at its expiry, and its
// id is free again from then on (a tombstone carries the expiry for that).

// Share is a public link to an account's blobs.
type Share struct {
	AccountID    string
	MetadataHash string
	// Serves are the distinct hashes the link may serve, MetadataHash among
	// them. CreateShare reads it; reads leave it nil.
	Serves []string
	// WrappedSecret is the passphrase-wrapped scope material; nil when the
	// link has no passphrase.
	WrappedSecret []byte
	// ExpiresAt is when the link stops being live; zero means never.
	ExpiresAt time.Time
	CreatedAt time.Time
}

type shareRecord struct {
	AccountID     string    `cbor:"1,keyasint"`
	MetadataHash  string    `cbor:"2,keyasint,omitempty"`
	WrappedSecret []byte    `cbor:"3,keyasint,omitempty"`
	ExpiresAt     time.Time `cbor:"4,keyasint,omitempty"`
	CreatedAt     time.Time `cbor:"5,keyasint"`
	// Digest identifies what was registered, so a retry of the same
	// registration is recognised without reading the serves back.
	Digest  []byte `cbor:"6,keyasint"`
	Revoked bool   `cbor:"7,keyasint,omitempty"`
	// RevokedAt is when the link was revoked; the sweep replaces the record
	// by a tombstone revokedShareKeep later.
	RevokedAt time.Time `cbor:"8,keyasint,omitempty"`
}

// revokedShareKeep is how long a revoked link's record stays before the
// sweep replaces it with a tombstone.
const revokedShareKeep = 30 * 24 * time.Hour

// shareTombstone stands for a revoked link once its record is swept: the id
// stays taken until the link's expiry, if it had one, and forever otherwise.
type shareTombstone struct {
	ExpiresAt time.Time `cbor:"1,keyasint,omitempty"`
}

// shareEntry is a link's line in shares_by_account: what the caps count.
// Serves is zero once the link is revoked (its served blobs are deleted
// then).
type shareEntry struct {
	Serves    int       `cbor:"1,keyasint,omitempty"`
	ExpiresAt time.Time `cbor:"2,keyasint,omitempty"`
	RevokedAt time.Time `cbor:"3,keyasint,omitempty"`
}

// ShareLimits bound the link records one account has: Links caps its
// links, and Serves the blobs its links serve together. Both count each
// link until the sweep removes what it holds: a revoked link's served
// blobs go at once but its record stays until the sweep replaces it by a
// tombstone, and an expired link's record and blobs stay until the sweep
// deletes them, so neither revoking nor short expiries let one account
// grow the store faster than the sweep shrinks it. A registration beyond
// either is error.limit.shares. Zero is no limit.
type ShareLimits struct {
	Links  int
	Serves int
}

// Limit flag names of the share caps.
const (
	LimitShareLinks  = "max-share-links"
	LimitShareServes = "max-share-serves"
)

// shareUsage is what an account's link records hold: how many there are,
// the blobs they serve, and the soonest a record frees its place (its expiry
// or its sweep after revocation) and a link frees its serves (its expiry).
type shareUsage struct {
	links, serves              int
	linkFreedAt, servesFreedAt time.Time
}

// accountShares sums the account's link records.
func accountShares(tx Tx, accountID string) (shareUsage, error) {
	var u shareUsage
	soonest := func(t *time.Time, at time.Time) {
		if t.IsZero() || at.Before(*t) {
			*t = at
		}
	}
	err := scanPrefix(tx.Bucket(bucketSharesByAccount), idPart(accountID), func(_, v []byte) error {
		var e shareEntry
		if err := decode(v, &e); err != nil {
			return err
		}
		u.links++
		if !e.ExpiresAt.IsZero() {
			soonest(&u.linkFreedAt, e.ExpiresAt)
		}
		if !e.RevokedAt.IsZero() {
			soonest(&u.linkFreedAt, e.RevokedAt.Add(revokedShareKeep))
			return nil
		}
		u.serves += e.Serves
		if !e.ExpiresAt.IsZero() {
			soonest(&u.servesFreedAt, e.ExpiresAt)
		}
		return nil
	})
	return u, err
}

// shareLimitWait is the wait named by a share cap that waiting alone does
// not lift (every link counted lives until revoked): a refusal by a limit
// always names a wait, and an hour is about how long a person takes to revoke links.
// shareSweepWait is the wait for a link already expired, which frees its
// place at the next sweep (every minute by default).
const (
	shareLimitWait = time.Hour
	shareSweepWait = time.Minute
)

// checkShareLimits refuses a new link of n served blobs that would take the
// account past lim at now, with the wait until a counted link frees its
// place, or shareLimitWait when none will by itself.
func checkShareLimits(tx Tx, accountID string, n int, lim ShareLimits, now time.Time) error {
	if lim.Links <= 0 && lim.Serves <= 0 {
		return nil
	}
	u, err := accountShares(tx, accountID)
	if err != nil {
		return err
	}
	wait := func(at time.Time) time.Duration {
		switch {
		case at.IsZero():
			return shareLimitWait
		case !at.After(now):
			return shareSweepWait
		}
		return at.Sub(now)
	}
	if lim.Links > 0 && u.links >= lim.Links {
		return fault.LimitErrorf(fault.ECodeLimitShares, LimitShareLinks, wait(u.linkFreedAt),
			"the account has %d share links (revoked ones count for 30 days); one must expire or be swept first", u.links)
	}
	if lim.Serves > 0 && u.serves+n > lim.Serves {
		return fault.LimitErrorf(fault.ECodeLimitShares, LimitShareServes, wait(u.servesFreedAt),
			"the account's share links serve %d blobs and this one %d more, past the %d allowed; revoke a link first", u.serves, n, lim.Serves)
	}
	return nil
}

// shareEntryKey is the link's line in shares_by_account.
func shareEntryKey(accountID string, key []byte) []byte { return join(idPart(accountID), key) }

func (t *shareTombstone) expired(now time.Time) bool {
	return !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt)
}

// ErrShareNotFound is the one answer of every share read that finds nothing
// to serve: an unknown, revoked or expired link, a blob the link does not
// name, the wrapped secret of a link without one. Being one value, it renders
// to byte-identical problem bodies, so a viewer cannot tell the cases apart.
var ErrShareNotFound = &fault.Error{Code: fault.ECodeShareNotFound, Message: "share link not found"}

// shareDigest is the SHA-256 of a registration's body in a canonical form
// (serves sorted), the identity an idempotent retry must match.
func shareDigest(sh *Share, sortedServes []string) []byte {
	var expires int64
	if !sh.ExpiresAt.IsZero() {
		expires = sh.ExpiresAt.UnixNano()
	}
	sum := sha256.Sum256(encode([]any{sh.MetadataHash, sortedServes, sh.WrappedSecret, expires}))
	return sum[:]
}

// getShare returns nil, nil when no link has the key.
func getShare(tx Tx, key []byte) (*shareRecord, error) {
	return getRecord[shareRecord](tx, bucketShares, key)
}

func (rec *shareRecord) expired(now time.Time) bool {
	return !rec.ExpiresAt.IsZero() && !now.Before(rec.ExpiresAt)
}

// due reports whether the sweep removes the record at now: the link has
// expired, or was revoked revokedShareKeep ago.
func (rec *shareRecord) due(now time.Time) bool {
	return rec.expired(now) || (rec.Revoked && !rec.RevokedAt.IsZero() && reached(rec.RevokedAt.Add(revokedShareKeep), now))
}

// sweepShare is the sweeper of links: it removes the link under key when it
// is due at now, leaving a tombstone for a revoked one that has not expired
// (swept in turn at the link's expiry, if it had one).
func sweepShare(tx Tx, key []byte, now time.Time) error {
	rec, err := getShare(tx, key)
	if err != nil || rec == nil || !rec.due(now) {
		return err
	}
	if err := deleteShare(tx, key, rec); err != nil || !rec.Revoked || rec.expired(now) {
		return err
	}
	return putShareTombstone(tx, key, rec)
}

// putShareTombstone keeps the id of the deleted link rec taken until its
// expiry, if it had one, and forever otherwise: an id once handed out never
// serves another link.
func putShareTombstone(tx Tx, key []byte, rec *shareRecord) error {
	if err := tx.Bucket(bucketShareTombstones).Put(key, encode(&shareTombstone{ExpiresAt: rec.ExpiresAt})); err != nil {
		return err
	}
	if rec.ExpiresAt.IsZero() {
		return nil
	}
	return putExpiry(tx, rec.ExpiresAt, kindShareTomb, key)
}

// liveShare returns the link the opaque id names when it is live at now and
// its owner is not disabled, else ErrShareNotFound.
func liveShare(tx Tx, key []byte, now time.Time) (*shareRecord, error) {
	rec, err := getShare(tx, key)
	if err != nil {
		return nil, err
	}
	if rec == nil || rec.Revoked || rec.expired(now) {
		return nil, ErrShareNotFound
	}
	if active, err := ownerActive(tx, rec.AccountID); err != nil || !active {
		return nil, cmp.Or(err, error(ErrShareNotFound))
	}
	return rec, nil
}

// deleteShareBlobs removes the link's list of served blobs.
func deleteShareBlobs(tx Tx, key []byte) error {
	return deletePrefix(tx.Bucket(bucketShareBlobs), key)
}

func deleteShare(tx Tx, key []byte, rec *shareRecord) error {
	if err := tx.Bucket(bucketShares).Delete(key); err != nil {
		return err
	}
	if err := tx.Bucket(bucketSharesByAccount).Delete(shareEntryKey(rec.AccountID, key)); err != nil {
		return err
	}
	if !rec.ExpiresAt.IsZero() {
		if err := deleteExpiry(tx, rec.ExpiresAt, kindShare, key); err != nil {
			return err
		}
	}
	return deleteShareBlobs(tx, key)
}

// tombstoned reports whether a swept revoked link still holds the id at
// now; a tombstone whose link has expired is removed.
func tombstoned(tx Tx, key []byte, now time.Time) (bool, error) {
	tomb, err := getRecord[shareTombstone](tx, bucketShareTombstones, key)
	if err != nil || tomb == nil {
		return false, err
	}
	if !tomb.expired(now) {
		return true, nil
	}
	if err := tx.Bucket(bucketShareTombstones).Delete(key); err != nil {
		return false, err
	}
	return false, deleteExpiry(tx, tomb.ExpiresAt, kindShareTomb, key)
}

// CreateShare registers the link sh under opaqueID. sh.Serves must hold
// distinct hashes, each one the account holds, else
// error.share.blob_not_owned: a link cannot expose another account's
// ciphertext. An id already registered answers nil again when it is the same
// account's live link registered the same (an idempotent retry; serves compare
// as a set) and error.share.id_taken otherwise, revoked links included. An id
// whose link has expired is free again. A new link that takes the account
// past lim is error.limit.shares, naming the cap.
func (s *Store) CreateShare(opaqueID string, sh *Share, lim ShareLimits) error {
	serves := slices.Sorted(slices.Values(sh.Serves))
	digest := shareDigest(sh, serves)
	return s.update(func(tx Tx) error { return createShare(tx, s.now(), opaqueID, sh, serves, digest, lim) })
}

// createShare is CreateShare inside tx at now; serves are sh.Serves sorted
// and digest the body's shareDigest.
func createShare(tx Tx, now time.Time, opaqueID string, sh *Share, serves []string, digest []byte, lim ShareLimits) error {
	key := HashToken(opaqueID)
	old, err := getShare(tx, key)
	if err != nil {
		return err
	}
	if old != nil && old.expired(now) {
		if err := deleteShare(tx, key, old); err != nil {
			return err
		}
		old = nil
	}
	if old == nil {
		if taken, err := tombstoned(tx, key, now); err != nil || taken {
			return cmp.Or(err, error(refuse(RuleShareIDFree)))
		}
	}
	if old != nil {
		if old.AccountID == sh.AccountID && !old.Revoked && bytes.Equal(old.Digest, digest) {
			return nil
		}
		return refuse(RuleShareIDFree)
	}
	for _, h := range serves {
		if held, err := holds(tx, sh.AccountID, h); err != nil {
			return err
		} else if !held {
			return refuse(RuleShareServesHeld, h)
		}
	}
	if err := checkShareLimits(tx, sh.AccountID, len(serves), lim, now); err != nil {
		return err
	}
	rec := shareRecord{
		AccountID: sh.AccountID, MetadataHash: sh.MetadataHash, WrappedSecret: sh.WrappedSecret,
		ExpiresAt: sh.ExpiresAt, CreatedAt: now, Digest: digest,
	}
	if err := tx.Bucket(bucketShares).Put(key, encode(&rec)); err != nil {
		return err
	}
	for _, h := range serves {
		if err := tx.Bucket(bucketShareBlobs).Put(join(key, []byte(h)), member); err != nil {
			return err
		}
	}
	entry := shareEntry{Serves: len(serves), ExpiresAt: rec.ExpiresAt}
	if err := tx.Bucket(bucketSharesByAccount).Put(shareEntryKey(rec.AccountID, key), encode(&entry)); err != nil {
		return err
	}
	if rec.ExpiresAt.IsZero() {
		return nil
	}
	return putExpiry(tx, rec.ExpiresAt, kindShare, key)
}

// RevokeShare ends the account's link named by opaqueID. It is idempotent
// and silent: an unknown, already revoked or another account's link changes
// nothing and is no error. The sweep replaces the revoked record with a
// tombstone revokedShareKeep later, or deletes it at the link's expiry if
// that comes first.
func (s *Store) RevokeShare(accountID, opaqueID string) error {
	return s.update(func(tx Tx) error {
		key := HashToken(opaqueID)
		rec, err := getShare(tx, key)
		if err != nil || rec == nil || rec.AccountID != accountID || rec.Revoked {
			return err
		}
		rec.Revoked, rec.RevokedAt, rec.MetadataHash, rec.WrappedSecret = true, s.now(), "", nil
		if err := tx.Bucket(bucketShares).Put(key, encode(rec)); err != nil {
			return err
		}
		if err := deleteShareBlobs(tx, key); err != nil {
			return err
		}
		entry := shareEntry{ExpiresAt: rec.ExpiresAt, RevokedAt: rec.RevokedAt}
		if err := tx.Bucket(bucketSharesByAccount).Put(shareEntryKey(accountID, key), encode(&entry)); err != nil {
			return err
		}
		if sweepAt := rec.RevokedAt.Add(revokedShareKeep); rec.ExpiresAt.IsZero() || sweepAt.Before(rec.ExpiresAt) {
			return putExpiry(tx, sweepAt, kindShare, key)
		}
		return nil
	})
}

// Share returns the live link named by opaqueID (without Serves), or
// ErrShareNotFound.
func (s *Store) Share(opaqueID string) (*Share, error) {
	var sh *Share
	err := s.view(func(tx Tx) error {
		rec, err := liveShare(tx, HashToken(opaqueID), s.now())
		if err != nil {
			return err
		}
		sh = &Share{
			AccountID: rec.AccountID, MetadataHash: rec.MetadataHash, WrappedSecret: copyBytes(rec.WrappedSecret),
			ExpiresAt: rec.ExpiresAt, CreatedAt: rec.CreatedAt,
		}
		return nil
	})
	return sh, err
}

// ShareBlob returns the record of blob hash when the live link named by
// opaqueID serves it, else ErrShareNotFound. The caller streams the file
// after this returns, so no read transaction stays open meanwhile.
func (s *Store) ShareBlob(opaqueID, hash string) (Blob, error) {
	key := HashToken(opaqueID)
	read, err := cached(s, s.shareCache, string(key)+hash, func() (read shareBlobRead, found bool, err error) {
		err = s.view(func(tx Tx) error {
			share, err := getShare(tx, key)
			if err != nil || share == nil {
				return err
			}
			if served, err := has(tx, bucketShareBlobs, join(key, []byte(hash))); err != nil || !served {
				return err
			}
			rec, err := getBlob(tx, hash)
			if err != nil {
				return err
			}
			held, err := holds(tx, share.AccountID, hash)
			if err != nil {
				return err
			}
			active, err := ownerActive(tx, share.AccountID)
			read = shareBlobRead{share: share, blob: rec, ownerDisabled: !active, released: !held}
			return err
		})
		return read, read.share != nil, err
	})
	if err != nil {
		return Blob{}, err
	}
	// Whether the link is live is decided on every call, cached or not: it
	// expires with the clock, not with a write. Disabling the owner is a
	// write, so no entry read before it is used after it.
	if read.share == nil || read.share.Revoked || read.ownerDisabled || read.released || read.share.expired(s.now()) {
		return Blob{}, ErrShareNotFound
	}
	if read.blob == nil {
		// A link only serves blobs its owner held when it was made.
		return Blob{}, fmt.Errorf("kv: a share serves blob %s, which has no record", hash)
	}
	return *read.blob, nil
}

// shareBlobRead is what ShareBlob reads of a link and one blob it names:
// share is nil when the link is unknown or does not serve the blob, blob
// nil when the blob has no record; ownerDisabled reports the link's owner
// disabled when it was read.
type shareBlobRead struct {
	share         *shareRecord
	blob          *Blob
	ownerDisabled bool
	// released is set when the owner no longer holds the blob (a deleted
	// photo purged from the trash): the link no longer serves it.
	released bool
}
