package kv

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"sealbox/kv/engine"
	"sealbox/kv/fault"
)

// Session is one signed-in lineage step. Its access and refresh tokens are
// known to the store only by their SHA-256.
type Session struct {
	ID        string
	AccountID string
	// LineageID is the id of the session that started this chain of
	// refreshes; reuse of a spent refresh token revokes the live session of
	// its lineage.
	LineageID string
	// ChainStartedAt is when the sign-in that began the chain happened; the
	// chain's absolute lifetime counts from it. A new session written
	// without one takes CreatedAt; records from before it existed read as
	// zero (see chainStart).
	ChainStartedAt   time.Time
	CreatedAt        time.Time
	AuthenticatedAt  time.Time
	AccessExpiresAt  time.Time
	RefreshExpiresAt time.Time
	// Optional advisory fields; "" means absent.
	UserAgent  string
	IPAddress  string
	CohortHash string
	DeviceID   string

	accessHash  []byte
	refreshHash []byte
	// chainKey names the session's refresh chain (refreshChainKey); nil for
	// a session whose refresh token names no chain (minted before chains),
	// found through the refresh token index instead.
	chainKey []byte
}

type sessionRecord struct {
	ID               string   `cbor:"1,keyasint"`
	AccountID        string   `cbor:"2,keyasint"`
	LineageID        string   `cbor:"3,keyasint"`
	CreatedAt        nanoTime `cbor:"4,keyasint"`
	AuthenticatedAt  nanoTime `cbor:"5,keyasint"`
	AccessExpiresAt  nanoTime `cbor:"6,keyasint"`
	RefreshExpiresAt nanoTime `cbor:"7,keyasint"`
	UserAgent        string   `cbor:"8,keyasint,omitempty"`
	IPAddress        string   `cbor:"9,keyasint,omitempty"`
	CohortHash       string   `cbor:"10,keyasint,omitempty"`
	DeviceID         string   `cbor:"11,keyasint,omitempty"`
	AccessHash       []byte   `cbor:"12,keyasint"`
	RefreshHash      []byte   `cbor:"13,keyasint"`
	ChainStartedAt   nanoTime `cbor:"14,keyasint,omitempty"`
	ChainKey         []byte   `cbor:"15,keyasint,omitempty"`
}

func (s *Session) record() *sessionRecord {
	return &sessionRecord{
		ID: s.ID, AccountID: s.AccountID, LineageID: s.LineageID,
		CreatedAt: toNano(s.CreatedAt), AuthenticatedAt: toNano(s.AuthenticatedAt),
		AccessExpiresAt: toNano(s.AccessExpiresAt), RefreshExpiresAt: toNano(s.RefreshExpiresAt),
		UserAgent: s.UserAgent, IPAddress: s.IPAddress, CohortHash: s.CohortHash, DeviceID: s.DeviceID,
		AccessHash: s.accessHash, RefreshHash: s.refreshHash,
		ChainStartedAt: toNano(s.ChainStartedAt), ChainKey: s.chainKey,
	}
}

func (r *sessionRecord) session() *Session {
	return &Session{
		ID: r.ID, AccountID: r.AccountID, LineageID: r.LineageID,
		CreatedAt: r.CreatedAt.Time(), AuthenticatedAt: r.AuthenticatedAt.Time(),
		AccessExpiresAt: r.AccessExpiresAt.Time(), RefreshExpiresAt: r.RefreshExpiresAt.Time(),
		UserAgent: r.UserAgent, IPAddress: r.IPAddress, CohortHash: r.CohortHash, DeviceID: r.DeviceID,
		accessHash: r.AccessHash, refreshHash: r.RefreshHash,
		ChainStartedAt: r.ChainStartedAt.Time(), chainKey: r.ChainKey,
	}
}

// sessionIndexKey orders one account's sessions by creation time, then id:
// listing them is a prefix scan of the account's rows (idPart), never a full
// scan.
func sessionIndexKey(accountID string, created time.Time, sessionID string) []byte {
	return join(idPart(accountID), timeKey(created), []byte(sessionID))
}

// putSession writes a session with its token lookups, account index and
// expiry entry. access and refresh are the bearer secrets; only their hashes
// are written.
func putSession(tx Tx, s *Session, access, refresh string) error {
	if s.LineageID == "" {
		s.LineageID = s.ID
	}
	if s.ChainStartedAt.IsZero() {
		s.ChainStartedAt = s.CreatedAt
	}
	s.accessHash, s.refreshHash = HashToken(access), HashToken(refresh)
	s.chainKey = refreshChainKey(refresh)
	return writeSession(tx, s)
}

// writeSession writes the session, its account index and expiry entries,
// and what finds it by refresh token: its chain's record, or for a session
// without a chain the refresh token index.
func writeSession(tx Tx, s *Session) error {
	id := []byte(s.ID)
	if err := tx.Bucket(bucketSessions).Put(id, encode(s.record())); err != nil {
		return err
	}
	if err := tx.Bucket(bucketSessionsByAccount).Put(sessionIndexKey(s.AccountID, s.CreatedAt, s.ID), nil); err != nil {
		return err
	}
	if err := tx.Bucket(bucketAccessTokens).Put(s.accessHash, id); err != nil {
		return err
	}
	byRefresh, key := bucketRefreshTokens, s.refreshHash
	if s.chainKey != nil {
		byRefresh, key = bucketRefreshChains, s.chainKey
	}
	if err := tx.Bucket(byRefresh).Put(key, id); err != nil {
		return err
	}
	return putExpiry(tx, s.RefreshExpiresAt, kindSession, id)
}

func getSession(tx Tx, id []byte) (*Session, error) {
	rec, err := getRecord[sessionRecord](tx, bucketSessions, id)
	if rec == nil {
		return nil, err
	}
	return rec.session(), nil
}

// tokenSession returns the id of the session a token's hash names in index
// (the access or refresh token index), or nil when none does.
func tokenSession(tx Tx, index, hash []byte) ([]byte, error) {
	id, err := tx.Bucket(index).Get(hash)
	return copyBytes(id), err
}

// deleteSession removes a session and everything that points at it. It
// reports whether a record was removed.
func deleteSession(tx Tx, id []byte) (bool, error) {
	s, err := getSession(tx, id)
	if err != nil || s == nil {
		return false, err
	}
	byRefresh, key := bucketRefreshTokens, s.refreshHash
	if s.chainKey != nil {
		byRefresh, key = bucketRefreshChains, s.chainKey
	}
	for _, del := range []struct {
		bucket []byte
		key    []byte
	}{
		{bucketSessions, id},
		{bucketSessionsByAccount, sessionIndexKey(s.AccountID, s.CreatedAt, s.ID)},
		{bucketAccessTokens, s.accessHash},
		{byRefresh, key},
	} {
		if err := tx.Bucket(del.bucket).Delete(del.key); err != nil {
			return false, err
		}
	}
	return true, deleteExpiry(tx, s.RefreshExpiresAt, kindSession, id)
}

// accountSessionIDs lists the ids of an account's sessions, oldest first.
func accountSessionIDs(tx Tx, accountID string) ([][]byte, error) {
	prefix := idPart(accountID)
	var ids [][]byte
	err := scanPrefix(tx.Bucket(bucketSessionsByAccount), prefix, func(k, _ []byte) error {
		ids = append(ids, copyBytes(k[len(prefix)+8:]))
		return nil
	})
	return ids, err
}

// deleteAccountSessions removes every session of the account except keep
// (when non-empty), and every pending sign-in challenge of the account (a
// sign-in the owner's action must end as surely as a session), and reports
// how many session records it removed.
func deleteAccountSessions(tx Tx, accountID, keep string) (int, error) {
	if err := deleteAccountChallenges(tx, accountID); err != nil {
		return 0, err
	}
	ids, err := accountSessionIDs(tx, accountID)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		if string(id) == keep {
			continue
		}
		removed, err := deleteSession(tx, id)
		if err != nil {
			return n, err
		}
		if removed {
			n++
		}
	}
	return n, nil
}

// LoginSucceeded records a verified sign-in without a second factor: it
// clears the address's failure count, opens the session and sights its
// cohort.
func (s *Store) LoginSucceeded(email string, sess *Session, access, refresh string) error {
	return s.update(func(tx Tx) error {
		return signedIn(tx, email, sess, access, refresh)
	})
}

// signedIn is the end of every completed sign-in (password alone, or
// password then second factor).
func signedIn(tx Tx, email string, sess *Session, access, refresh string) error {
	if err := clearLockout(tx, email); err != nil {
		return err
	}
	if err := putSession(tx, sess, access, refresh); err != nil {
		return err
	}
	return sightCohort(tx, sess)
}

// Authenticate returns the live session an access token belongs to, or
// error.auth.unauthenticated for an unknown, revoked or expired token.
func (s *Store) Authenticate(access string) (*Session, error) {
	hash := HashToken(access)
	sess, err := cached(s, s.sessionCache, string(hash), func() (*Session, bool, error) {
		// The token and its session in one read: on PostgreSQL one
		// statement, the request's only exchange before its own work.
		b, err := s.follow(bucketAccessTokens, hash, bucketSessions)
		if err != nil {
			return nil, false, err
		}
		rec, err := decodeRecord[sessionRecord](b)
		if rec == nil || err != nil {
			return nil, false, err
		}
		return rec.session(), true, nil
	})
	if err != nil {
		return nil, err
	}
	return s.liveSession(sess)
}

// liveSession returns a copy of sess, read for an access token, or
// error.auth.unauthenticated when there is none or its access has expired:
// the expiry is checked on every call, cached or not.
func (s *Store) liveSession(sess *Session) (*Session, error) {
	if sess == nil || !s.now().Before(sess.AccessExpiresAt) {
		return nil, fault.Errorf(fault.ECodeUnauthenticated, "the access token is unknown, revoked or expired")
	}
	own := *sess // the cached Session stays as it was read
	return &own, nil
}

// AuthenticateAccount is Authenticate for a request whose work is the
// caller's own account: it returns the session and its account. When the
// token names its account (AccessToken) and the engine reads with single
// statements (PostgreSQL), the token, its session and the account are read
// with one statement, so the request costs one exchange with the database;
// otherwise the two are read one after the other, as Authenticate and
// Account read them.
func (s *Store) AuthenticateAccount(access string) (*Session, *Account, error) {
	r, reads := s.engine.(engine.StatementReader)
	id, named := "", false
	if reads {
		id, named = AccessTokenAccount(access)
	}
	if !named {
		sess, err := s.Authenticate(access)
		if err != nil {
			return nil, nil, err
		}
		acct, err := s.Account(sess.AccountID)
		return sess, acct, err
	}
	sb, ab, err := r.FollowBeside(bucketAccessTokens, HashToken(access), bucketSessions, engine.Key{Bucket: bucketAccounts, Key: []byte(id)})
	if err != nil {
		return nil, nil, err
	}
	rec, err := decodeRecord[sessionRecord](sb)
	if err != nil {
		return nil, nil, err
	}
	var read *Session
	if rec != nil {
		read = rec.session()
	}
	sess, err := s.liveSession(read)
	if err != nil {
		return nil, nil, err
	}
	if sess.AccountID != id {
		// Never minted so (AccessToken names the session's own account):
		// the session decides, and its account is read on its own.
		acct, err := s.Account(sess.AccountID)
		return sess, acct, err
	}
	acct, err := accountOf(decodeRecord[accountRecord](ab))
	return sess, acct, err
}

// An access token names its account, so that a request whose work is the
// caller's own account (the profile) reads the token's session and the
// account with one statement on PostgreSQL (AuthenticateAccount) instead of
// one after the other. The account's id is not a secret from the token's
// holder, who is that account; the secret part is 256 bits as for every
// token, and the store keeps only the SHA-256 of the whole token, so the id
// cannot be altered without the token becoming unknown. Tokens minted before
// name no account and authenticate as they always did.
const (
	accessPrefix    = "sbx_at_"
	accessSecretLen = 32
	accountIDLen    = 16 // a UUID's bytes
)

// AccessToken spells the access token of accountID with secret: the prefix,
// then the account id's 16 bytes and the secret together in base64url
// without padding. An id that is not a canonical UUID is left out, and the
// token names no account.
func AccessToken(accountID string, secret [accessSecretLen]byte) string {
	id, ok := uuidBytes(accountID)
	if !ok {
		return accessPrefix + base64.RawURLEncoding.EncodeToString(secret[:])
	}
	return accessPrefix + base64.RawURLEncoding.EncodeToString(append(id[:], secret[:]...))
}

// AccessTokenAccount returns the account id an access token names, and
// false for a token that names none (minted before tokens named accounts,
// or garbage). Only the store's lookup of the whole token says whether the
// token is real.
func AccessTokenAccount(token string) (string, bool) {
	rest, found := strings.CutPrefix(token, accessPrefix)
	if !found || len(rest) != base64.RawURLEncoding.EncodedLen(accountIDLen+accessSecretLen) {
		return "", false
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(rest)
	if err != nil || len(raw) != accountIDLen+accessSecretLen {
		return "", false
	}
	return uuidString(raw[:accountIDLen]), true
}

// uuidBytes returns the 16 bytes of a canonical lowercase UUID.
func uuidBytes(s string) (b [accountIDLen]byte, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return b, false
	}
	digits := s[:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	if strings.ToLower(digits) != digits {
		return b, false
	}
	if _, err := hex.Decode(b[:], []byte(digits)); err != nil {
		return b, false
	}
	return b, true
}

// uuidString spells 16 bytes as a canonical lowercase UUID.
func uuidString(b []byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// A refresh token names its chain, so that an earlier token of the chain is
// recognised without keeping a record per rotation: a chain has one record
// (refresh_chains: the SHA-256 of its id -> its live session's id), and the
// live session holds the hash of the chain's current token. A presented
// token whose chain is known but whose hash is not the current one is an
// earlier token of the chain: reuse. Tokens minted before chains name none;
// they are found through the refresh token index, and when spent leave a
// spentRefreshRecord until they would have expired, as they always did.
const (
	refreshPrefix    = "sbx_rt_"
	refreshChainLen  = 16
	refreshSecretLen = 32
)

// RefreshToken spells the refresh token of chain with secret: the prefix,
// then chain and secret together in base64url without padding (at least 256
// bits of secret, like every token).
func RefreshToken(chain [refreshChainLen]byte, secret [refreshSecretLen]byte) string {
	return refreshPrefix + base64.RawURLEncoding.EncodeToString(append(chain[:], secret[:]...))
}

// RefreshChain returns the chain a refresh token names, and false for a
// token of any other shape (one minted before chains, or garbage).
func RefreshChain(token string) (chain [refreshChainLen]byte, ok bool) {
	rest, found := strings.CutPrefix(token, refreshPrefix)
	if !found || len(rest) != base64.RawURLEncoding.EncodedLen(refreshChainLen+refreshSecretLen) {
		return chain, false
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(rest)
	if err != nil || len(raw) != refreshChainLen+refreshSecretLen {
		return chain, false
	}
	copy(chain[:], raw)
	return chain, true
}

// refreshChainKey is the key of the chain a refresh token names (only its
// SHA-256 is stored, as for every part of a token), or nil when it names
// none.
func refreshChainKey(token string) []byte {
	chain, ok := RefreshChain(token)
	if !ok {
		return nil
	}
	sum := sha256.Sum256(chain[:])
	return sum[:]
}

type spentRefreshRecord struct {
	AccountID string    `cbor:"1,keyasint"`
	LineageID string    `cbor:"2,keyasint"`
	ExpiresAt time.Time `cbor:"3,keyasint"`
}

// chainStart is when the sign-in that began a session's refresh chain
// happened. A session written before chains were dated counts from its
// last password verification.
func chainStart(s *Session) time.Time {
	if s.ChainStartedAt.IsZero() {
		return s.AuthenticatedAt
	}
	return s.ChainStartedAt
}

// Refresh rotates a session: the session the refresh token names is deleted
// and next is written in its place, in one transaction. next must carry its
// new ID, CreatedAt, expiries, UserAgent and IPAddress; the account, lineage,
// chain start, cohort, device and authenticated_at carry over, and neither
// expiry may pass the chain's end (maxAge after its sign-in), past which
// the refresh is refused like an expired one. newRefresh must name the
// presented token's chain (RefreshToken), or a new one when the presented
// token names none. A refresh token presented a second time is refused with
// error.auth.session_expired and revokes the session its lineage rotated
// into (reuse detection).
func (s *Store) Refresh(refresh string, next *Session, access, newRefresh string, maxAge time.Duration) error {
	expired := fault.Errorf(fault.ECodeSessionExpired, "the refresh token is unknown, spent or expired")
	return s.commitThenRefuse(func(tx Tx) (error, error) {
		now := s.now()
		old, err := presentedSession(tx, refresh, now)
		if old == nil || err != nil {
			return expired, err
		}
		end := Deadline(chainStart(old), maxAge)
		if _, err := deleteSession(tx, []byte(old.ID)); err != nil {
			return nil, err
		}
		if reached(old.RefreshExpiresAt, now) || reached(end, now) {
			return expired, nil
		}
		if old.chainKey == nil {
			spent := spentRefreshRecord{AccountID: old.AccountID, LineageID: old.LineageID, ExpiresAt: old.RefreshExpiresAt}
			if err := tx.Bucket(bucketSpentRefresh).Put(old.refreshHash, encode(&spent)); err != nil {
				return nil, err
			}
			if err := putExpiry(tx, spent.ExpiresAt, kindSpentRefresh, old.refreshHash); err != nil {
				return nil, err
			}
		}
		next.AccountID, next.LineageID = old.AccountID, old.LineageID
		next.CohortHash, next.DeviceID = old.CohortHash, old.DeviceID
		next.AuthenticatedAt, next.ChainStartedAt = old.AuthenticatedAt, chainStart(old)
		next.AccessExpiresAt, next.RefreshExpiresAt = earliest(next.AccessExpiresAt, end), earliest(next.RefreshExpiresAt, end)
		return nil, putSession(tx, next, access, newRefresh)
	})
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// presentedSession returns the session a presented refresh token belongs
// to, expired or not, or nil when it belongs to none. A token that is not
// its chain's current one (or, without a chain, a spent one) is reuse: the
// chain's live session is deleted, and nil returned.
func presentedSession(tx Tx, refresh string, now time.Time) (*Session, error) {
	hash := HashToken(refresh)
	key := refreshChainKey(refresh)
	if key == nil {
		id, err := tokenSession(tx, bucketRefreshTokens, hash)
		if err != nil {
			return nil, err
		}
		if id == nil {
			return nil, revokeReusedLineage(tx, hash, now)
		}
		return getSession(tx, id)
	}
	id, err := tokenSession(tx, bucketRefreshChains, key)
	if id == nil || err != nil {
		return nil, err
	}
	sess, err := getSession(tx, id)
	if sess == nil || err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare(sess.refreshHash, hash) != 1 {
		_, err := deleteSession(tx, id)
		return nil, err
	}
	return sess, nil
}

// revokeReusedLineage handles a refresh token without a chain that is not
// live: when it is a spent one, the live session its lineage rotated into is
// deleted.
func revokeReusedLineage(tx Tx, hash []byte, now time.Time) error {
	spent, err := getRecord[spentRefreshRecord](tx, bucketSpentRefresh, hash)
	if spent == nil || err != nil || reached(spent.ExpiresAt, now) {
		return err
	}
	ids, err := accountSessionIDs(tx, spent.AccountID)
	if err != nil {
		return err
	}
	for _, id := range ids {
		sess, err := getSession(tx, id)
		if err != nil {
			return err
		}
		if sess != nil && sess.LineageID == spent.LineageID {
			if _, err := deleteSession(tx, id); err != nil {
				return err
			}
		}
	}
	return nil
}

// Logout deletes the session an access token belongs to, live or expired.
// It is idempotent: an unknown token changes nothing.
func (s *Store) Logout(access string) error {
	return s.update(func(tx Tx) error {
		id, err := tokenSession(tx, bucketAccessTokens, HashToken(access))
		if id == nil || err != nil {
			return err
		}
		_, err = deleteSession(tx, id)
		return err
	})
}

// DeleteSession deletes one of the account's sessions. A session of another
// account answers exactly as an unknown one: error.session.not_found.
func (s *Store) DeleteSession(accountID, sessionID string) error {
	return s.update(func(tx Tx) error {
		sess, err := getSession(tx, []byte(sessionID))
		if err != nil {
			return err
		}
		if sess == nil || sess.AccountID != accountID || !s.now().Before(sess.RefreshExpiresAt) {
			return fault.Errorf(fault.ECodeSessionNotFound, "session not found")
		}
		_, err = deleteSession(tx, []byte(sessionID))
		return err
	})
}

// DeleteAccountSessions closes every session of the account (and its pending
// sign-in challenges: a global sign-out ends those too) and reports how
// many records were removed.
func (s *Store) DeleteAccountSessions(accountID string) (int, error) {
	var n int
	err := s.update(func(tx Tx) (err error) {
		n, err = deleteAccountSessions(tx, accountID, "")
		return err
	})
	return n, err
}

// Reauthenticated records a verified password on a live session: the
// address's failure count is cleared and the session's authenticated_at
// becomes at. No token changes.
func (s *Store) Reauthenticated(email, sessionID string, at time.Time) error {
	return s.update(func(tx Tx) error {
		if err := clearLockout(tx, email); err != nil {
			return err
		}
		return touchAuthenticated(tx, sessionID, at)
	})
}

func touchAuthenticated(tx Tx, sessionID string, at time.Time) error {
	sess, err := getSession(tx, []byte(sessionID))
	if err != nil {
		return err
	}
	if sess == nil {
		return fault.Errorf(fault.ECodeUnauthenticated, "the session has ended")
	}
	sess.AuthenticatedAt = at
	return writeSession(tx, sess)
}

// ChangePassword writes a new password hash after the current one was
// verified, closes every other session of the account and keeps the
// caller's (same id, same tokens) with authenticated_at = at — one
// transaction, so no other pair outlives the change.
func (s *Store) ChangePassword(accountID, sessionID, newHash string, at time.Time) error {
	return s.update(func(tx Tx) error {
		a, err := getAccount(tx, accountID)
		if err != nil {
			return err
		}
		if err := clearLockout(tx, a.Email); err != nil {
			return err
		}
		a.PasswordHash = newHash
		if err := putAccount(tx, a); err != nil {
			return err
		}
		if _, err := deleteAccountSessions(tx, accountID, sessionID); err != nil {
			return err
		}
		return touchAuthenticated(tx, sessionID, at)
	})
}
