package kv

import (
	"time"

	bolt "go.etcd.io/bbolt"

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
	LineageID        string
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
}

func (s *Session) record() *sessionRecord {
	return &sessionRecord{
		ID: s.ID, AccountID: s.AccountID, LineageID: s.LineageID,
		CreatedAt: toNano(s.CreatedAt), AuthenticatedAt: toNano(s.AuthenticatedAt),
		AccessExpiresAt: toNano(s.AccessExpiresAt), RefreshExpiresAt: toNano(s.RefreshExpiresAt),
		UserAgent: s.UserAgent, IPAddress: s.IPAddress, CohortHash: s.CohortHash, DeviceID: s.DeviceID,
		AccessHash: s.accessHash, RefreshHash: s.refreshHash,
	}
}

func (r *sessionRecord) session() *Session {
	return &Session{
		ID: r.ID, AccountID: r.AccountID, LineageID: r.LineageID,
		CreatedAt: r.CreatedAt.Time(), AuthenticatedAt: r.AuthenticatedAt.Time(),
		AccessExpiresAt: r.AccessExpiresAt.Time(), RefreshExpiresAt: r.RefreshExpiresAt.Time(),
		UserAgent: r.UserAgent, IPAddress: r.IPAddress, CohortHash: r.CohortHash, DeviceID: r.DeviceID,
		accessHash: r.AccessHash, refreshHash: r.RefreshHash,
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
func putSession(tx *bolt.Tx, s *Session, access, refresh string) error {
	if s.LineageID == "" {
		s.LineageID = s.ID
	}
	s.accessHash, s.refreshHash = HashToken(access), HashToken(refresh)
	return writeSession(tx, s)
}

func writeSession(tx *bolt.Tx, s *Session) error {
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
	if err := tx.Bucket(bucketRefreshTokens).Put(s.refreshHash, id); err != nil {
		return err
	}
	return putExpiry(tx, s.RefreshExpiresAt, kindSession, id)
}

func getSession(tx *bolt.Tx, id []byte) (*Session, error) {
	return sessionIn(tx.Bucket(bucketSessions), id)
}

// sessionIn reads a session from the sessions bucket; a loop over many
// sessions opens the bucket once instead of once per session.
func sessionIn(bucket *bolt.Bucket, id []byte) (*Session, error) {
	b := bucket.Get(id)
	if b == nil {
		return nil, nil
	}
	var rec sessionRecord
	if err := decode(b, &rec); err != nil {
		return nil, err
	}
	return rec.session(), nil
}

// deleteSession removes a session and everything that points at it. It
// reports whether a record was removed.
func deleteSession(tx *bolt.Tx, id []byte) (bool, error) {
	s, err := getSession(tx, id)
	if err != nil || s == nil {
		return false, err
	}
	for _, del := range []struct {
		bucket []byte
		key    []byte
	}{
		{bucketSessions, id},
		{bucketSessionsByAccount, sessionIndexKey(s.AccountID, s.CreatedAt, s.ID)},
		{bucketAccessTokens, s.accessHash},
		{bucketRefreshTokens, s.refreshHash},
	} {
		if err := tx.Bucket(del.bucket).Delete(del.key); err != nil {
			return false, err
		}
	}
	return true, deleteExpiry(tx, s.RefreshExpiresAt, kindSession, id)
}

func sweepSession(tx *bolt.Tx, id []byte, now time.Time) error {
	s, err := getSession(tx, id)
	if err != nil || s == nil || now.Before(s.RefreshExpiresAt) {
		return err
	}
	_, err = deleteSession(tx, id)
	return err
}

// accountSessionIDs lists the ids of an account's sessions, oldest first.
func accountSessionIDs(tx *bolt.Tx, accountID string) [][]byte {
	prefix := idPart(accountID)
	var ids [][]byte
	scanPrefix(tx.Bucket(bucketSessionsByAccount), prefix, func(k, _ []byte) error {
		ids = append(ids, copyBytes(k[len(prefix)+8:]))
		return nil
	})
	return ids
}

// deleteAccountSessions removes every session of the account except keep
// (when non-empty) and reports how many records it removed.
func deleteAccountSessions(tx *bolt.Tx, accountID, keep string) (int, error) {
	n := 0
	for _, id := range accountSessionIDs(tx, accountID) {
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
	return s.update(func(tx *bolt.Tx) error {
		return signedIn(tx, email, sess, access, refresh)
	})
}

// signedIn is the end of every completed sign-in (password alone, or
// password then second factor).
func signedIn(tx *bolt.Tx, email string, sess *Session, access, refresh string) error {
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
	var sess *Session
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		id := tx.Bucket(bucketAccessTokens).Get(HashToken(access))
		if id == nil {
			return nil
		}
		sess, err = getSession(tx, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	if sess == nil || !s.now().Before(sess.AccessExpiresAt) {
		return nil, fault.Errorf(fault.ECodeUnauthenticated, "the access token is unknown, revoked or expired")
	}
	return sess, nil
}

type spentRefreshRecord struct {
	AccountID string    `cbor:"1,keyasint"`
	LineageID string    `cbor:"2,keyasint"`
	ExpiresAt time.Time `cbor:"3,keyasint"`
}

// Refresh rotates a session: the session the refresh token names is deleted
// and next is written in its place, in one transaction. next must carry its
// new ID, CreatedAt, expiries, UserAgent and IPAddress; the account, lineage,
// cohort, device and authenticated_at carry over. A refresh token presented
// a second time is refused with error.auth.session_expired and revokes the
// session its lineage rotated into (reuse detection).
func (s *Store) Refresh(refresh string, next *Session, access, newRefresh string) error {
	expired := fault.Errorf(fault.ECodeSessionExpired, "the refresh token is unknown, spent or expired")
	return s.commitThenRefuse(func(tx *bolt.Tx) (error, error) {
		now := s.now()
		hash := HashToken(refresh)
		id := tx.Bucket(bucketRefreshTokens).Get(hash)
		if id == nil {
			return expired, revokeReusedLineage(tx, hash, now)
		}
		old, err := getSession(tx, copyBytes(id))
		if err != nil {
			return nil, err
		}
		if old == nil || !now.Before(old.RefreshExpiresAt) {
			if old != nil {
				_, err = deleteSession(tx, []byte(old.ID))
			}
			return expired, err
		}
		if _, err := deleteSession(tx, []byte(old.ID)); err != nil {
			return nil, err
		}
		spent := spentRefreshRecord{AccountID: old.AccountID, LineageID: old.LineageID, ExpiresAt: old.RefreshExpiresAt}
		if err := tx.Bucket(bucketSpentRefresh).Put(hash, encode(&spent)); err != nil {
			return nil, err
		}
		if err := putExpiry(tx, spent.ExpiresAt, kindSpentRefresh, hash); err != nil {
			return nil, err
		}
		next.AccountID, next.LineageID = old.AccountID, old.LineageID
		next.CohortHash, next.DeviceID = old.CohortHash, old.DeviceID
		next.AuthenticatedAt = old.AuthenticatedAt
		return nil, putSession(tx, next, access, newRefresh)
	})
}

// revokeReusedLineage handles a refresh token that is not live: when it is a
// spent one, the live session its lineage rotated into is deleted.
func revokeReusedLineage(tx *bolt.Tx, hash []byte, now time.Time) error {
	b := tx.Bucket(bucketSpentRefresh).Get(hash)
	if b == nil {
		return nil
	}
	var spent spentRefreshRecord
	if err := decode(b, &spent); err != nil {
		return err
	}
	if !now.Before(spent.ExpiresAt) {
		return nil
	}
	for _, id := range accountSessionIDs(tx, spent.AccountID) {
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

func sweepSpentRefresh(tx *bolt.Tx, id []byte, now time.Time) error {
	b := tx.Bucket(bucketSpentRefresh).Get(id)
	if b == nil {
		return nil
	}
	var spent spentRefreshRecord
	if err := decode(b, &spent); err != nil {
		return err
	}
	if now.Before(spent.ExpiresAt) {
		return nil
	}
	return tx.Bucket(bucketSpentRefresh).Delete(id)
}

// Logout deletes the session an access token belongs to, live or expired.
// It is idempotent: an unknown token changes nothing.
func (s *Store) Logout(access string) error {
	return s.update(func(tx *bolt.Tx) error {
		id := tx.Bucket(bucketAccessTokens).Get(HashToken(access))
		if id == nil {
			return nil
		}
		_, err := deleteSession(tx, copyBytes(id))
		return err
	})
}

// DeleteSession deletes one of the account's sessions. A session of another
// account answers exactly as an unknown one: error.session.not_found.
func (s *Store) DeleteSession(accountID, sessionID string) error {
	return s.update(func(tx *bolt.Tx) error {
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

// DeleteAccountSessions closes every session of the account and reports how
// many records were removed.
func (s *Store) DeleteAccountSessions(accountID string) (int, error) {
	var n int
	err := s.update(func(tx *bolt.Tx) (err error) {
		n, err = deleteAccountSessions(tx, accountID, "")
		return err
	})
	return n, err
}

// liveSessions lists the account's sessions not expired at now, oldest first.
func liveSessions(tx *bolt.Tx, accountID string, now time.Time) ([]*Session, error) {
	var out []*Session
	prefix := idPart(accountID)
	sessions := tx.Bucket(bucketSessions)
	err := scanPrefix(tx.Bucket(bucketSessionsByAccount), prefix, func(k, _ []byte) error {
		sess, err := sessionIn(sessions, k[len(prefix)+8:])
		if sess != nil && now.Before(sess.RefreshExpiresAt) {
			out = append(out, sess)
		}
		return err
	})
	return out, err
}

// Reauthenticated records a verified password on a live session: the
// address's failure count is cleared and the session's authenticated_at
// becomes at. No token changes.
func (s *Store) Reauthenticated(email, sessionID string, at time.Time) error {
	return s.update(func(tx *bolt.Tx) error {
		if err := clearLockout(tx, email); err != nil {
			return err
		}
		return touchAuthenticated(tx, sessionID, at)
	})
}

func touchAuthenticated(tx *bolt.Tx, sessionID string, at time.Time) error {
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
	return s.update(func(tx *bolt.Tx) error {
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
