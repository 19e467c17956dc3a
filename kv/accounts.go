package kv

import (
	"slices"
	"time"

	"sealbox/kv/fault"
)

// Account is one user of the server. Email is normalized (trimmed,
// lowercased) before it reaches the store.
type Account struct {
	ID           string
	Email        string
	PasswordHash string
	DisplayName  *string
	CreatedAt    time.Time
	// Factors are the account's second factors, confirmed or pending (see
	// Factor); a sign-in to an account with a confirmed one is held at its
	// second factor.
	Factors []Factor
	// TOTPLastStep is the replay ledger: the newest time step accepted from
	// this account. It outlives disable and re-enrollment, because a step is
	// a moment in time, not a property of one secret.
	TOTPLastStep uint64
	// Disabled accounts cannot sign in (the operator's `users disable`).
	Disabled bool
	// QuotaBytes caps the bytes of blobs the account holds; 0 is unlimited.
	QuotaBytes int64
}

type accountRecord struct {
	ID           string    `cbor:"1,keyasint"`
	Email        string    `cbor:"2,keyasint"`
	PasswordHash string    `cbor:"3,keyasint"`
	DisplayName  *string   `cbor:"4,keyasint,omitempty"`
	CreatedAt    time.Time `cbor:"5,keyasint"`
	TOTPSecret   []byte    `cbor:"6,keyasint,omitempty"`
	TOTPPending  []byte    `cbor:"7,keyasint,omitempty"`
	TOTPLastStep uint64    `cbor:"8,keyasint,omitempty"`
	Disabled     bool      `cbor:"20,keyasint,omitempty"`
	QuotaBytes   int64     `cbor:"21,keyasint,omitempty"`
}

// FactorKind is a kind of second factor.
type FactorKind uint8

// FactorTOTP is a time-based one-time password (RFC 6238). Its proof is a
// code (TOTPProof); its steps go into the account's replay ledger.
const FactorTOTP FactorKind = 1

// Factor is one second factor of an account: its kind, its secret sealed
// by the server (the store never holds it in clear), and whether a proof
// confirmed it. An account has at most one factor of a kind in each state:
// a pending one awaits its confirming proof (a new enrollment replaces it),
// and only a confirmed one guards sign-in.
type Factor struct {
	Kind      FactorKind
	Sealed    []byte
	Confirmed bool
}

// Factor is the account's factor of kind in the given state, or nil.
func (a *Account) Factor(kind FactorKind, confirmed bool) *Factor {
	for i := range a.Factors {
		if f := &a.Factors[i]; f.Kind == kind && f.Confirmed == confirmed {
			return f
		}
	}
	return nil
}

// HasConfirmedFactor reports whether a sign-in must prove a second factor:
// whether any of the account's factors, of any kind, is confirmed.
func (a *Account) HasConfirmedFactor() bool {
	return slices.ContainsFunc(a.Factors, func(f Factor) bool { return f.Confirmed })
}

// setFactor makes f the account's factor of its kind and state, replacing
// the one there.
func (a *Account) setFactor(f Factor) {
	a.dropFactor(f.Kind, f.Confirmed)
	a.Factors = append(a.Factors, f)
}

// dropFactor removes the account's factor of kind in the given state, if
// it has one.
func (a *Account) dropFactor(kind FactorKind, confirmed bool) {
	a.Factors = slices.DeleteFunc(a.Factors, func(f Factor) bool { return f.Kind == kind && f.Confirmed == confirmed })
}

// account is the Account a record holds. The TOTP factor keeps the two
// keys it had before accounts listed their factors (6: confirmed, 7:
// pending), so records read and write as they always did; another kind
// will need keys of its own.
func (rec *accountRecord) account() *Account {
	a := &Account{
		ID: rec.ID, Email: rec.Email, PasswordHash: rec.PasswordHash, DisplayName: rec.DisplayName,
		CreatedAt: rec.CreatedAt, TOTPLastStep: rec.TOTPLastStep, Disabled: rec.Disabled, QuotaBytes: rec.QuotaBytes,
	}
	if rec.TOTPSecret != nil {
		a.Factors = append(a.Factors, Factor{Kind: FactorTOTP, Sealed: rec.TOTPSecret, Confirmed: true})
	}
	if rec.TOTPPending != nil {
		a.Factors = append(a.Factors, Factor{Kind: FactorTOTP, Sealed: rec.TOTPPending})
	}
	return a
}

func newAccountRecord(a *Account) *accountRecord {
	rec := &accountRecord{
		ID: a.ID, Email: a.Email, PasswordHash: a.PasswordHash, DisplayName: a.DisplayName,
		CreatedAt: a.CreatedAt, TOTPLastStep: a.TOTPLastStep, Disabled: a.Disabled, QuotaBytes: a.QuotaBytes,
	}
	if f := a.Factor(FactorTOTP, true); f != nil {
		rec.TOTPSecret = f.Sealed
	}
	if f := a.Factor(FactorTOTP, false); f != nil {
		rec.TOTPPending = f.Sealed
	}
	return rec
}

func getAccount(tx Tx, id string) (*Account, error) {
	return accountOf(getRecord[accountRecord](tx, bucketAccounts, []byte(id)))
}

// accountOf is the Account of a record read, error.account.not_found for
// none.
func accountOf(rec *accountRecord, err error) (*Account, error) {
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, fault.Errorf(fault.ECodeAccountNotFound, "account not found")
	}
	return rec.account(), nil
}

// ownerActive reports whether the account that owns a share link or a relay
// channel may still use it: the links and channels of a disabled account
// answer as if they did not exist, and those still live come back when the
// operator enables the account again. Being read in the same transaction as
// the link or channel, the answer is never older than the last commit, on
// any node. A deleted account's links and channels are deleted with it
// (DeleteAccount), so only the flag refuses here; its enrollment codes, kept
// by code alone, live out their few minutes.
func ownerActive(tx Tx, accountID string) (bool, error) {
	rec, err := getRecord[accountRecord](tx, bucketAccounts, []byte(accountID))
	if err != nil {
		return false, err
	}
	return rec == nil || !rec.Disabled, nil
}

// getAccountByEmail returns nil, nil when no account has the address.
func getAccountByEmail(tx Tx, email string) (*Account, error) {
	id, err := tx.Bucket(bucketAccountsByEmail).Get([]byte(email))
	if id == nil || err != nil {
		return nil, err
	}
	return getAccount(tx, string(id))
}

// insertAccount writes a new account and its email index entry; an address
// already registered is error.account.exists.
func insertAccount(tx Tx, a *Account) error {
	byEmail := tx.Bucket(bucketAccountsByEmail)
	if taken, err := byEmail.Get([]byte(a.Email)); taken != nil || err != nil {
		if err != nil {
			return err
		}
		return fault.Errorf(fault.ECodeAccountExists, "an account with this email already exists")
	}
	if err := byEmail.Put([]byte(a.Email), []byte(a.ID)); err != nil {
		return err
	}
	return putAccount(tx, a)
}

func putAccount(tx Tx, a *Account) error {
	return tx.Bucket(bucketAccounts).Put([]byte(a.ID), encode(newAccountRecord(a)))
}

// CreateAccount writes a new account and its first session in one
// transaction. An address already registered is error.account.exists.
func (s *Store) CreateAccount(a *Account, first *Session, access, refresh string) error {
	return s.update(func(tx Tx) error {
		if err := insertAccount(tx, a); err != nil {
			return err
		}
		return putSession(tx, first, access, refresh)
	})
}

// Account returns the account with the given id.
//
// It is one of the cached reads (readCache): every authenticated request
// that shows the caller's account reads it.
func (s *Store) Account(id string) (*Account, error) {
	a, err := cached(s, s.accountCache, id, func() (*Account, bool, error) {
		// One record: on PostgreSQL one statement, with no commit to wait
		// for.
		b, err := s.readOne(bucketAccounts, []byte(id))
		if err != nil {
			return nil, false, err
		}
		a, err := accountOf(decodeRecord[accountRecord](b))
		return a, a != nil, err
	})
	if err != nil {
		return nil, err
	}
	own := *a // the cached Account stays as it was read
	return &own, nil
}

// AccountByEmail returns the account registered under email, or
// error.account.not_found.
func (s *Store) AccountByEmail(email string) (*Account, error) {
	var a *Account
	err := s.view(func(tx Tx) (err error) {
		a, err = getAccountByEmail(tx, email)
		return err
	})
	if err == nil && a == nil {
		return nil, fault.Errorf(fault.ECodeAccountNotFound, "account not found")
	}
	return a, err
}

// SetDisplayName sets (name non-nil) or clears (nil) the display name.
func (s *Store) SetDisplayName(accountID string, name *string) (*Account, error) {
	var a *Account
	err := s.update(func(tx Tx) (err error) {
		if a, err = getAccount(tx, accountID); err != nil {
			return err
		}
		a.DisplayName = name
		return putAccount(tx, a)
	})
	return a, err
}

// AddAccount writes a new account without opening a session (an operator
// adding a user). An address already registered is error.account.exists.
func (s *Store) AddAccount(a *Account) error {
	return s.update(func(tx Tx) error { return insertAccount(tx, a) })
}

// AccountDeletion is what DeleteAccount did.
type AccountDeletion struct {
	AccountID string
	// LogIndex is the index of the deletion's record in the transparency
	// log.
	LogIndex int64
	// RevokedSessions counts the sessions closed; UnheldBlobs the blobs
	// nobody holds any more, which gc removes after its grace period.
	RevokedSessions int
	UnheldBlobs     int
}

// DeleteAccount deletes the account registered under email and everything
// that is its own, in one transaction (server/PROTOCOL.md §2): sessions and
// pending sign-ins, lockout, second factor, escrow, directory, albums with
// their feeds, assets and upgrades, upload sessions and transfers, share
// links, relay channels, the invitations bound to its email, and its
// holdings, so a blob nobody else holds is left to gc. The transparency log
// keeps every record of the account and gains AccountDeletedLogRecord. The
// email may be registered again, as a new account with a new id.
func (s *Store) DeleteAccount(email string) (AccountDeletion, error) {
	var d AccountDeletion
	err := s.update(func(tx Tx) error {
		d = AccountDeletion{}
		a, err := mustAccountByEmail(tx, email)
		if err != nil {
			return err
		}
		d.AccountID = a.ID
		dir, err := getDirectory(tx, a.ID)
		if err != nil {
			return err
		}
		if d.RevokedSessions, err = deleteAccountSessions(tx, a.ID, ""); err != nil {
			return err
		}
		if d.UnheldBlobs, err = deleteAccountData(tx, a, s.now()); err != nil {
			return err
		}
		var version uint64
		var key []byte
		if dir != nil {
			version, key = dir.Version, dir.IdentityKey
		}
		if d.LogIndex, err = appendLog(tx, AccountDeletedLogRecord(a.ID, version, key)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketAccountsByEmail).Delete([]byte(a.Email)); err != nil {
			return err
		}
		return tx.Bucket(bucketAccounts).Delete([]byte(a.ID))
	})
	return d, err
}

// deleteAccountData deletes what the account owns but its record, email
// and sessions, and reports how many blobs nobody holds any more. Its live
// links leave tombstones, as revoked ones do, so their ids stay taken.
func deleteAccountData(tx Tx, a *Account, now time.Time) (int, error) {
	own := idPart(a.ID)
	for _, r := range []struct{ bucket, key []byte }{
		{bucketLockouts, []byte(a.Email)}, {bucketTOTPAttempts, []byte(a.ID)},
		{bucketEscrow, []byte(a.ID)}, {bucketDirectories, []byte(a.ID)},
	} {
		if err := tx.Bucket(r.bucket).Delete(r.key); err != nil {
			return 0, err
		}
	}
	for _, b := range [][]byte{bucketCohorts, bucketBlobRefs} {
		if err := deletePrefix(tx.Bucket(b), own); err != nil {
			return 0, err
		}
	}
	uploads, err := prefixKeys(tx.Bucket(bucketUploadsByAccount), own)
	if err != nil {
		return 0, err
	}
	for _, k := range uploads {
		key := k[len(own):]
		u, err := getUpload(tx, key)
		if err != nil {
			return 0, err
		}
		if u == nil {
			if err := tx.Bucket(bucketUploadsByAccount).Delete(k); err != nil {
				return 0, err
			}
			continue
		}
		if err := deleteUpload(tx, key, u); err != nil {
			return 0, err
		}
	}
	albums, err := prefixKeys(tx.Bucket(bucketAlbumsByAccount), own)
	if err != nil {
		return 0, err
	}
	for _, k := range albums {
		// albumIndexKey: the account part, a fixed-width time, the id.
		if err := deleteAlbum(tx, string(k[len(own)+8:])); err != nil {
			return 0, err
		}
		if err := tx.Bucket(bucketAlbumsByAccount).Delete(k); err != nil {
			return 0, err
		}
	}
	channels, err := prefixKeys(tx.Bucket(bucketRelayChannelsByAccount), own)
	if err != nil {
		return 0, err
	}
	for _, k := range channels {
		key := k[len(own):]
		ch, err := getRecord[channelRecord](tx, bucketRelayChannels, key)
		if err != nil {
			return 0, err
		}
		if ch == nil {
			if err := tx.Bucket(bucketRelayChannelsByAccount).Delete(k); err != nil {
				return 0, err
			}
			continue
		}
		if err := deleteChannel(tx, key, ch); err != nil {
			return 0, err
		}
	}
	shares, err := prefixKeys(tx.Bucket(bucketSharesByAccount), own)
	if err != nil {
		return 0, err
	}
	for _, k := range shares {
		key := k[len(own):]
		rec, err := getShare(tx, key)
		if err != nil {
			return 0, err
		}
		if rec == nil {
			if err := tx.Bucket(bucketSharesByAccount).Delete(k); err != nil {
				return 0, err
			}
			continue
		}
		if err := deleteShare(tx, key, rec); err != nil {
			return 0, err
		}
		if !rec.expired(now) {
			if err := putShareTombstone(tx, key, rec); err != nil {
				return 0, err
			}
		}
	}
	if err := deleteEmailInvites(tx, a.Email); err != nil {
		return 0, err
	}
	holdings, err := prefixKeys(tx.Bucket(bucketHoldings), own)
	if err != nil {
		return 0, err
	}
	unheld := 0
	for _, k := range holdings {
		gone, err := releaseBlob(tx, a.ID, string(k[len(own):]))
		if err != nil {
			return 0, err
		}
		if gone {
			unheld++
		}
	}
	return unheld, tx.Bucket(bucketUsage).Delete([]byte(a.ID))
}

// deleteAlbum deletes the album and everything kept under it: its feed,
// assets (and the blobs they name), applied manifests, upgrade and
// tombstones; its assets in the trash leave expiry entries the sweep
// finds nothing for. Its upload sessions
// are its account's, deleted with them.
func deleteAlbum(tx Tx, albumID string) error {
	if err := deleteUpgrade(tx, albumID); err != nil {
		return err
	}
	for _, b := range [][]byte{bucketFeed, bucketAssets, bucketAppliedManifests, bucketTombstones, bucketAssetBlobs} {
		if err := deletePrefix(tx.Bucket(b), idPart(albumID)); err != nil {
			return err
		}
	}
	return tx.Bucket(bucketAlbums).Delete([]byte(albumID))
}
