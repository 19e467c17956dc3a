package kv

import (
	"time"

	bolt "go.etcd.io/bbolt"
)

// LockoutPolicy: Failures consecutive failed password verifications lock
// the address for Window.
type LockoutPolicy struct {
	Failures int
	Window   time.Duration
}

type lockoutRecord struct {
	Failures    int       `cbor:"1,keyasint"`
	LastFailure time.Time `cbor:"2,keyasint"`
	LockedUntil time.Time `cbor:"3,keyasint,omitempty"`
	// ExpiresAt is when nothing in the record can matter any more: the lock
	// has ended and the last failure has left the window.
	ExpiresAt time.Time `cbor:"4,keyasint"`
}

// BeginPasswordAttempt must precede every password verification (login,
// reauthenticate, password change). It refuses a locked address with
// error.auth.account_locked, without any verification. Otherwise it counts
// the attempt as a failure in advance — the check and the increment are one
// transaction, so parallel guesses cannot exceed the limit while their
// verifications run — and returns the account registered under email, or nil
// when there is none: unknown addresses are counted and locked the same way,
// so a 423 never reveals whether an account exists. A verified password
// clears the count through the success methods (LoginSucceeded,
// Reauthenticated, ChangePassword).
func (s *Store) BeginPasswordAttempt(email string, p LockoutPolicy) (*Account, error) {
	var a *Account
	err := s.db.Update(func(tx *bolt.Tx) error {
		now := s.now()
		key := []byte(email)
		var rec lockoutRecord
		if b := tx.Bucket(bucketLockouts).Get(key); b != nil {
			if err := decode(b, &rec); err != nil {
				return err
			}
		}
		if now.Before(rec.LockedUntil) {
			return &Error{Code: ECodeAccountLocked, Message: "too many failed attempts; the account is locked for a while", RetryAfter: rec.LockedUntil.Sub(now)}
		}
		if !rec.LockedUntil.IsZero() || !now.Before(rec.LastFailure.Add(p.Window)) {
			rec = lockoutRecord{}
		}
		rec.Failures++
		rec.LastFailure = now
		if rec.Failures >= p.Failures {
			rec.LockedUntil = now.Add(p.Window)
		}
		rec.ExpiresAt = now.Add(p.Window)
		if err := tx.Bucket(bucketLockouts).Put(key, encode(&rec)); err != nil {
			return err
		}
		if err := putExpiry(tx, rec.ExpiresAt, kindLockout, key); err != nil {
			return err
		}
		var err error
		a, err = getAccountByEmail(tx, email)
		return err
	})
	return a, err
}

func clearLockout(tx *bolt.Tx, email string) error {
	return tx.Bucket(bucketLockouts).Delete([]byte(email))
}

// sweepLockout drops a counter once nothing in it can matter.
func sweepLockout(tx *bolt.Tx, id []byte, now time.Time) error {
	b := tx.Bucket(bucketLockouts).Get(id)
	if b == nil {
		return nil
	}
	var rec lockoutRecord
	if err := decode(b, &rec); err != nil {
		return err
	}
	if now.Before(rec.ExpiresAt) {
		return nil
	}
	return tx.Bucket(bucketLockouts).Delete(id)
}
