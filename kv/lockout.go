package kv

import (
	"time"

	"sealbox/kv/fault"
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

// The lockout counts completed failed password verifications per
// normalized address, for unknown addresses too, so a lockout never reveals
// whether an account exists. The verifications in flight are kept here too,
// so that parallel guesses cannot pass the limit while they run, whichever
// nodes run them: EnterPasswordAttempt admits one only while the failures
// counted plus those in flight stay under the limit, and records it in the
// same transaction.
//
//   - password_attempts: idPart(email)|entry -> attemptRecord, one per
//     verification in flight. Each carries an expiry, so the entries of a
//     node that died mid-verification stop counting (and are swept). On an
//     engine one process holds (bbolt) the entries stay in that process's
//     memory instead (memoryAttempts) and this bucket stays empty.

// current returns the address's counter as it stands at now under p: a
// counter whose lock has ended or whose last failure left the window starts
// again from zero.
func currentLockout(tx Tx, email string, p LockoutPolicy, now time.Time) (lockoutRecord, error) {
	stored, err := getRecord[lockoutRecord](tx, bucketLockouts, []byte(email))
	if err != nil {
		return lockoutRecord{}, err
	}
	var rec lockoutRecord
	if stored != nil {
		rec = *stored
	}
	if now.Before(rec.LockedUntil) {
		return rec, &fault.Error{Code: fault.ECodeAccountLocked, Message: "too many failed attempts; the account is locked for a while", RetryAfter: rec.LockedUntil.Sub(now)}
	}
	if !rec.LockedUntil.IsZero() || !now.Before(rec.LastFailure.Add(p.Window)) {
		rec = lockoutRecord{}
	}
	return rec, nil
}

// PasswordAttempt precedes a password verification (login, reauthenticate,
// password change). It refuses a locked address with
// error.auth.account_locked, without any verification; otherwise it returns
// the account registered under email (nil when there is none) and the
// failures counted against the address.
func (s *Store) PasswordAttempt(email string, p LockoutPolicy) (*Account, int, error) {
	var a *Account
	var failures int
	err := s.view(func(tx Tx) error {
		rec, err := currentLockout(tx, email, p, s.now())
		if err != nil {
			return err
		}
		failures = rec.Failures
		a, err = getAccountByEmail(tx, email)
		return err
	})
	return a, failures, err
}

// CountPasswordFailure counts one failed verification against the address
// and locks it for p.Window when the count reaches p.Failures. A verified
// password clears the count through the success methods (LoginSucceeded,
// Reauthenticated, ChangePassword).
func (s *Store) CountPasswordFailure(email string, p LockoutPolicy) error {
	return s.update(func(tx Tx) error { return countFailure(tx, email, p, s.now()) })
}

// PasswordFailed counts the failure of the verification entry that
// EnterPasswordAttempt admitted, as CountPasswordFailure does, and ends it
// (LeavePasswordAttempt) in the same transaction: the next verification
// admitted sees the failure, and a wrong guess costs one commit.
func (s *Store) PasswordFailed(email, entry string, p LockoutPolicy) error {
	return s.attempts.failed(email, entry, p)
}

func countFailure(tx Tx, email string, p LockoutPolicy, now time.Time) error {
	rec, err := currentLockout(tx, email, p, now)
	if err != nil {
		return err
	}
	rec.Failures++
	rec.LastFailure = now
	if rec.Failures >= p.Failures {
		rec.LockedUntil = now.Add(p.Window)
	}
	rec.ExpiresAt = now.Add(p.Window)
	key := []byte(email)
	if err := tx.Bucket(bucketLockouts).Put(key, encode(&rec)); err != nil {
		return err
	}
	return putExpiry(tx, rec.ExpiresAt, kindLockout, key)
}

func clearLockout(tx Tx, email string) error {
	return tx.Bucket(bucketLockouts).Delete([]byte(email))
}

// EnterPasswordAttempt admits one password verification for the address
// (login, reauthenticate, password change), in one transaction: it refuses
// a locked address with error.auth.account_locked, then counts the failures
// recorded and the verifications in flight for it and, while those stay
// under p.Failures, records the verification entry (a caller-chosen id,
// unique among its verifications in flight) as in flight until ttl from
// now. It returns the account registered under email (nil when there is
// none) and whether the verification was admitted; not admitted, nothing
// was written and the caller waits for a verification to end. ttl bounds
// how long an entry whose node died keeps counting: it must exceed the
// longest verification, waits for the hasher included.
//
// Where the entries are kept is the store's attemptLedger, chosen when it
// opens: in its memory on an engine one process holds alone, in the store
// elsewhere.
func (s *Store) EnterPasswordAttempt(email, entry string, p LockoutPolicy, ttl time.Duration) (*Account, bool, error) {
	return s.attempts.enter(email, entry, p, ttl)
}

// LeavePasswordAttempt ends the verification entry that EnterPasswordAttempt
// admitted for the address: a verification that did not fail (a wrong
// password ends with PasswordFailed instead, so the next verification
// admitted sees the failure). An entry already gone is not an error.
func (s *Store) LeavePasswordAttempt(email, entry string) error {
	return s.attempts.leave(email, entry)
}
