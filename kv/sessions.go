package kv

import (
	"time"

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
func putSession(tx Tx, s *Session, access, refresh string) error {
	if s.LineageID == "" {
		s.LineageID = s.ID
	}
	s.accessHash, s.refreshHash = HashToken(access), HashToken(refresh)
	return writeSession(tx, s)
}

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
	if err := tx.Bucket(bucketRefreshTokens).Put(s.refreshHash, id); err != nil {
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
	sess, err := cached(s, &s.sessionCache, string(hash), func() (sess *Session, found bool, err error) {
		err = s.view(func(tx Tx) (err error) {
			sess = nil
			id, err := tokenSession(tx, bucketAccessTokens, hash)
			if id == nil || err != nil {
				return err
			}
			sess, err = getSession(tx, id)
			return err
		})
		return sess, sess != nil, err
	})
	if err != nil {
		return nil, err
	}
	// The expiry is checked on every call, cached or not.
	if sess == nil || !s.now().Before(sess.AccessExpiresAt) {
		return nil, fault.Errorf(fault.ECodeUnauthenticated, "the access token is unknown, revoked or expired")
	}
	own := *sess // the cached Session stays as it was read
	return &own, nil
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
	return s.commitThenRefuse(func(tx Tx) (error, error) {
		now := s.now()
		hash := HashToken(refresh)
		id, err := tokenSession(tx, bucketRefreshTokens, hash)
		if err != nil {
			return nil, err
		}
		if id == nil {
			return expired, revokeReusedLineage(tx, hash, now)
		}
		old, err := getSession(tx, id)
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

// liveSessions lists the account's sessions not expired at now, oldest first.
func liveSessions(tx Tx, accountID string, now time.Time) ([]*Session, error) {
	var out []*Session
	ids, err := accountSessionIDs(tx, accountID)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		sess, err := getSession(tx, id)
		if err != nil {
			return nil, err
		}
		if sess != nil && now.Before(sess.RefreshExpiresAt) {
			out = append(out, sess)
		}
	}
	return out, nil
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
