package kv

import (
	"errors"
	"sync"
	"time"

	"sealbox/kv/engine"
)

// attemptLedger keeps the password verifications in flight that
// EnterPasswordAttempt admits, with the lockout's failures: a store picks
// one when it opens (newAttemptLedger) and never asks its engine again.
type attemptLedger interface {
	// enter is EnterPasswordAttempt.
	enter(email, entry string, p LockoutPolicy, ttl time.Duration) (*Account, bool, error)
	// failed is PasswordFailed: the failure is counted before the entry
	// ends, so no verification is admitted between the two.
	failed(email, entry string, p LockoutPolicy) error
	// leave is LeavePasswordAttempt.
	leave(email, entry string) error
}

// newAttemptLedger is the ledger of a store over e. On an engine one process
// holds alone (engine.Exclusive), that process's verifications are every
// verification there is, and an entry means nothing after it ends: the
// entries are kept in memory (memoryAttempts), the lockout is read in a
// view, and a sign-in costs no more commits than without the ledger.
// Elsewhere (PostgreSQL, a networked engine all nodes use) they are kept in the store
// (storedAttempts), where every node counts them.
func newAttemptLedger(s *Store, e Engine) attemptLedger {
	if _, ok := e.(engine.Exclusive); ok {
		return &memoryAttempts{s: s, entries: map[string]map[string]time.Time{}}
	}
	return storedAttempts{s: s}
}

type attemptRecord struct {
	ExpiresAt time.Time `cbor:"1,keyasint"`
}

func attemptKey(email, entry string) []byte { return join(idPart(email), []byte(entry)) }

// errAttemptsFull rolls back an EnterPasswordAttempt that admitted nothing.
var errAttemptsFull = errors.New("kv: the address has as many verifications in flight as it may")

// storedAttempts keeps the verifications in flight in the
// password_attempts bucket: entering is one update transaction.
type storedAttempts struct{ s *Store }

func (l storedAttempts) enter(email, entry string, p LockoutPolicy, ttl time.Duration) (*Account, bool, error) {
	var a *Account
	admitted := false
	err := l.s.update(func(tx Tx) error {
		a, admitted = nil, false
		now := l.s.now()
		rec, err := currentLockout(tx, email, p, now)
		if err != nil {
			return err
		}
		if a, err = getAccountByEmail(tx, email); err != nil {
			return err
		}
		attempts := tx.Bucket(bucketPasswordAttempts)
		inFlight := 0
		var lapsed []attemptLapse
		err = scanPrefix(attempts, idPart(email), func(k, v []byte) error {
			var at attemptRecord
			if err := decode(v, &at); err != nil {
				return err
			}
			if reached(at.ExpiresAt, now) {
				lapsed = append(lapsed, attemptLapse{copyBytes(k), at.ExpiresAt})
			} else {
				inFlight++
			}
			return nil
		})
		if err != nil {
			return err
		}
		if rec.Failures+inFlight >= p.Failures {
			return errAttemptsFull
		}
		for _, l := range lapsed {
			if err := removeAttempt(tx, l.key, l.expiresAt); err != nil {
				return err
			}
		}
		key := attemptKey(email, entry)
		at := attemptRecord{ExpiresAt: now.Add(ttl)}
		if err := attempts.Put(key, encode(&at)); err != nil {
			return err
		}
		if err := putExpiry(tx, at.ExpiresAt, kindAttempt, key); err != nil {
			return err
		}
		admitted = true
		return nil
	})
	if errors.Is(err, errAttemptsFull) {
		return a, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return a, admitted, nil
}

type attemptLapse struct {
	key       []byte
	expiresAt time.Time
}

func (l storedAttempts) failed(email, entry string, p LockoutPolicy) error {
	return l.s.update(func(tx Tx) error {
		if err := countFailure(tx, email, p, l.s.now()); err != nil {
			return err
		}
		return leaveAttempt(tx, email, entry)
	})
}

func (l storedAttempts) leave(email, entry string) error {
	return l.s.update(func(tx Tx) error { return leaveAttempt(tx, email, entry) })
}

func leaveAttempt(tx Tx, email, entry string) error {
	key := attemptKey(email, entry)
	at, err := getRecord[attemptRecord](tx, bucketPasswordAttempts, key)
	if err != nil || at == nil {
		return err
	}
	return removeAttempt(tx, key, at.ExpiresAt)
}

func removeAttempt(tx Tx, key []byte, expiresAt time.Time) error {
	if err := deleteExpiry(tx, expiresAt, kindAttempt, key); err != nil {
		return err
	}
	return tx.Bucket(bucketPasswordAttempts).Delete(key)
}

// memoryAttempts are the verifications in flight of a Store whose engine no
// other process uses: email -> entry -> expiry.
type memoryAttempts struct {
	s       *Store
	mu      sync.Mutex
	entries map[string]map[string]time.Time
}

// enter is EnterPasswordAttempt in memory. The lock is held across the read
// of the failures counted, so two callers never both take the last place.
func (l *memoryAttempts) enter(email, entry string, p LockoutPolicy, ttl time.Duration) (*Account, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.s
	var a *Account
	var failures int
	var now time.Time
	err := s.view(func(tx Tx) error {
		now = s.now()
		rec, err := currentLockout(tx, email, p, now)
		if err != nil {
			return err
		}
		failures = rec.Failures
		a, err = getAccountByEmail(tx, email)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	live := l.entries[email]
	for e, expiresAt := range live {
		if reached(expiresAt, now) {
			delete(live, e)
		}
	}
	if failures+len(live) >= p.Failures {
		return a, false, nil
	}
	if live == nil {
		live = map[string]time.Time{}
		l.entries[email] = live
	}
	live[entry] = now.Add(ttl)
	return a, true, nil
}

func (l *memoryAttempts) failed(email, entry string, p LockoutPolicy) error {
	err := l.s.update(func(tx Tx) error { return countFailure(tx, email, p, l.s.now()) })
	if err != nil {
		return err
	}
	return l.leave(email, entry)
}

func (l *memoryAttempts) leave(email, entry string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if live := l.entries[email]; live != nil {
		delete(live, entry)
		if len(live) == 0 {
			delete(l.entries, email)
		}
	}
	return nil
}
