package kv

import (
	"time"

	"sealbox/kv/fault"
)

// The second factor: the account's factors (Account.Factors), the proofs
// that settle them, the TOTP replay ledger, and the sign-in challenges that
// stand between a verified password and a session.
//
// Secrets reach the store sealed under the server's key, so kv cannot check
// a proof by itself. The caller lends it a Proof, and kv runs its check
// inside the transaction that reads the factor and records what the proof
// spends (for TOTP, the replay ledger): the check and the update are one
// atomic step, so one proof can never be accepted twice.

// Proof is what a caller presents for one kind of second factor. Every
// operation that takes one acts on the account's factor of the proof's
// kind: that is where verification dispatches by kind, and a new kind is a
// new Proof.
type Proof interface {
	// Kind is the kind of factor the proof is for.
	Kind() FactorKind
	// check verifies the proof against f at now and records on a what it
	// spends (the caller writes a). A refusal is a fault.Error; any other
	// error is the proof's own failure (a secret that will not unseal).
	check(a *Account, f *Factor, now time.Time) error
}

// TOTPProof is a code presented for the TOTP factor, as the matcher the
// server lends: kv cannot open the sealed secret itself.
type TOTPProof CodeMatcher

// Kind is FactorTOTP.
func (TOTPProof) Kind() FactorKind { return FactorTOTP }

// CodeMatcher reports the time step a presented code belongs to under the
// account's sealed secret at now, or ok false when the code matches none of
// the steps accepted at now. It must not block: it runs inside a write
// transaction.
type CodeMatcher func(accountID string, sealed []byte, now time.Time) (step uint64, ok bool, err error)

// check accepts the code when it matches a step of f's secret newer than
// the replay ledger's, and records that step on a.
func (match TOTPProof) check(a *Account, f *Factor, now time.Time) error {
	step, ok, err := match(a.ID, f.Sealed, now)
	if err != nil {
		return err
	}
	if !ok {
		return fault.Errorf(fault.ECodeInvalidCode, "the code is wrong or out of date")
	}
	if step <= a.TOTPLastStep {
		return fault.Errorf(fault.ECodeCodeReplayed, "this code was already used; wait for the next one")
	}
	a.TOTPLastStep = step
	return nil
}

// EnrollFactor records sealed as the account's pending factor of kind,
// replacing a pending one (whose secret can then confirm nothing), and
// returns the account. An account whose factor of kind is confirmed is
// refused with error.totp.already_active.
func (s *Store) EnrollFactor(accountID string, kind FactorKind, sealed []byte) (*Account, error) {
	var a *Account
	err := s.update(func(tx Tx) (err error) {
		if a, err = getAccount(tx, accountID); err != nil {
			return err
		}
		if a.Factor(kind, true) != nil {
			return fault.Errorf(fault.ECodeTOTPAlreadyActive, "a second factor is already active; disable it first")
		}
		a.setFactor(Factor{Kind: kind, Sealed: sealed})
		return putAccount(tx, a)
	})
	return a, err
}

// CodeLimit bounds the wrong codes an account's signed-in code checks
// (confirming an enrollment, disabling the second factor) may be given: at
// most Attempts in any Window. Name is the setting that sets it, carried by
// the refusal (fault.Error.Limit).
type CodeLimit struct {
	Attempts int
	Window   time.Duration
	Name     string
}

// codeFailuresRecord holds the instants of the account's latest wrong codes
// at signed-in code checks, oldest first, at most CodeLimit.Attempts of
// them: what the limit needs, and no more, whatever the number of guesses.
type codeFailuresRecord struct {
	Failures []nanoTime `cbor:"1,keyasint"`
	// ExpiresAt is when the newest failure leaves the window.
	ExpiresAt nanoTime `cbor:"2,keyasint"`
}

// recentCodeFailures returns the account's wrong codes still inside the
// window at now, and refuses with error.rate_limited (and the wait until the
// oldest of them leaves the window) when they are already at the limit: then
// no code is checked, the right one included, so the answer never tells a
// guess that was close from one that was not.
func recentCodeFailures(tx Tx, accountID string, limit CodeLimit, now time.Time) (*codeFailuresRecord, error) {
	rec, err := getRecord[codeFailuresRecord](tx, bucketTOTPAttempts, []byte(accountID))
	if err != nil || rec == nil {
		return &codeFailuresRecord{}, err
	}
	live := rec.Failures[:0:0]
	for _, at := range rec.Failures {
		if now.Before(at.Time().Add(limit.Window)) {
			live = append(live, at)
		}
	}
	if len(live) >= limit.Attempts {
		wait := live[len(live)-limit.Attempts].Time().Add(limit.Window).Sub(now)
		return rec, fault.LimitErrorf(fault.ECodeRateLimited, limit.Name, wait, "too many wrong codes for this account; try again later")
	}
	rec.Failures = live
	return rec, nil
}

// countCodeFailure adds a wrong code at now to rec (as recentCodeFailures
// returned it) and writes it back, keeping the latest limit.Attempts.
func countCodeFailure(tx Tx, accountID string, rec *codeFailuresRecord, limit CodeLimit, now time.Time) error {
	key := []byte(accountID)
	if rec.ExpiresAt != 0 {
		if err := deleteExpiry(tx, rec.ExpiresAt.Time(), kindTOTPAttempts, key); err != nil {
			return err
		}
	}
	rec.Failures = append(rec.Failures, toNano(now))
	if extra := len(rec.Failures) - limit.Attempts; extra > 0 {
		rec.Failures = rec.Failures[extra:]
	}
	rec.ExpiresAt = toNano(now.Add(limit.Window))
	if err := tx.Bucket(bucketTOTPAttempts).Put(key, encode(rec)); err != nil {
		return err
	}
	return putExpiry(tx, rec.ExpiresAt.Time(), kindTOTPAttempts, key)
}

// ConfirmFactor makes the account's pending factor of the proof's kind a
// confirmed one when the proof settles it; what the proof spends is
// recorded (a TOTP code's step goes into the replay ledger, so the
// confirming code is spent at once). Sign-in challenges still pending are
// deleted: they were issued under the factors this one joins. Nothing
// pending: error.totp.nothing_pending. A refused proof
// (error.auth.invalid_code, error.auth.code_replayed) changes nothing but
// counts against limit.
func (s *Store) ConfirmFactor(accountID string, proof Proof, limit CodeLimit) error {
	return s.changeSecondFactor(accountID, proof, limit, false,
		func() error {
			return fault.Errorf(fault.ECodeTOTPNothingPending, "no second-factor enrollment is pending")
		},
		func(a *Account, f Factor) {
			a.dropFactor(f.Kind, false)
			f.Confirmed = true
			a.setFactor(f)
		})
}

// DisableFactor removes the account's confirmed factor of the proof's kind
// when the proof settles it (a session alone is not enough), and deletes
// the account's pending sign-in challenges. Not enrolled:
// error.totp.not_enrolled. A refused proof changes nothing but counts
// against limit. The replay ledger is kept.
func (s *Store) DisableFactor(accountID string, proof Proof, limit CodeLimit) error {
	return s.changeSecondFactor(accountID, proof, limit, true,
		func() error { return fault.Errorf(fault.ECodeTOTPNotEnrolled, "no second factor is active") },
		func(a *Account, f Factor) { a.dropFactor(f.Kind, true) })
}

// changeSecondFactor applies change to the account's factor of the proof's
// kind, confirmed or pending as confirmed says, once the proof settles it
// (refused with missing when there is none), in one transaction with the
// check of limit and the count of a refused proof, so parallel guesses, on
// any node, cannot pass the limit. A refused proof changes nothing else.
func (s *Store) changeSecondFactor(accountID string, proof Proof, limit CodeLimit, confirmed bool, missing func() error, change func(*Account, Factor)) error {
	return s.commitThenRefuse(func(tx Tx) (error, error) {
		now := s.now()
		a, err := getAccount(tx, accountID)
		if err != nil {
			return nil, err
		}
		f := a.Factor(proof.Kind(), confirmed)
		if f == nil {
			return missing(), nil
		}
		failures, err := recentCodeFailures(tx, accountID, limit, now)
		if fault.ErrorCode(err) != "" {
			return err, nil
		}
		if err != nil {
			return nil, err
		}
		if err := proof.check(a, f, now); err != nil {
			if fault.ErrorCode(err) == "" {
				return nil, err // the proof failed: not the caller's fault
			}
			return err, countCodeFailure(tx, accountID, failures, limit, now)
		}
		change(a, *f)
		if err := putAccount(tx, a); err != nil {
			return nil, err
		}
		return nil, deleteAccountChallenges(tx, accountID)
	})
}

// A sign-in challenge is stored under the SHA-256 of its token. A burned
// challenge (Failures at the limit) is kept until it would have expired, so
// further attempts are answered as rate limited rather than as unknown.
type mfaChallengeRecord struct {
	AccountID string    `cbor:"1,keyasint"`
	ExpiresAt time.Time `cbor:"2,keyasint"`
	Failures  int       `cbor:"3,keyasint,omitempty"`
}

// CreateMFAChallenge stores a sign-in challenge for the account until
// expiresAt. Only the token's hash is written. Whatever ends the account's
// other credentials (a password change, a global sign-out, a change of its
// second factor, an operator's reset) deletes its pending challenges too
// (deleteAccountChallenges).
func (s *Store) CreateMFAChallenge(token, accountID string, expiresAt time.Time) error {
	return s.update(func(tx Tx) error {
		key := HashToken(token)
		rec := mfaChallengeRecord{AccountID: accountID, ExpiresAt: expiresAt}
		if err := tx.Bucket(bucketMFAChallenges).Put(key, encode(&rec)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketMFAChallengesByAccount).Put(join(idPart(accountID), key), member); err != nil {
			return err
		}
		return putExpiry(tx, expiresAt, kindMFAChallenge, key)
	})
}

// VerifyLogin finishes a sign-in held at its second factor, in one
// transaction: the challenge named by token is looked up, the proof checked
// against the account's confirmed factor of its kind (a TOTP code against
// the secret, its step against the replay ledger), and on success the
// challenge is deleted, what the proof spends recorded, the address's
// failure count cleared (the sign-in is complete only now) and sess opened
// with its cohort sighted. sess must carry everything but AccountID, which
// comes from the challenge.
//
// Refusals: an unknown or expired challenge is error.auth.challenge_expired;
// a refused proof (a wrong or replayed code) is error.auth.invalid_code or
// error.auth.code_replayed and counts against the challenge; once maxFailures
// proofs were refused the challenge is burned and every later attempt, until
// it would have expired, is error.rate_limited with RetryAfter.
func (s *Store) VerifyLogin(token string, proof Proof, maxFailures int, sess *Session, access, refresh string) error {
	expired := fault.Errorf(fault.ECodeChallengeExpired, "the sign-in challenge is unknown or expired; sign in again")
	return s.commitThenRefuse(func(tx Tx) (error, error) {
		now := s.now()
		key := HashToken(token)
		ch, err := getRecord[mfaChallengeRecord](tx, bucketMFAChallenges, key)
		if err != nil {
			return nil, err
		}
		if ch == nil || reached(ch.ExpiresAt, now) {
			return expired, nil
		}
		if ch.Failures >= maxFailures {
			return &fault.Error{Code: fault.ECodeRateLimited, Message: "too many wrong codes for this sign-in; sign in again later", RetryAfter: ch.ExpiresAt.Sub(now)}, nil
		}
		a, err := getAccount(tx, ch.AccountID)
		if err != nil {
			return nil, err
		}
		f := a.Factor(proof.Kind(), true)
		if f == nil || a.Disabled {
			// The factor was disabled since the challenge was issued,
			// and the challenge no longer guards anything; or the operator
			// disabled the account, which no sign-in may then complete
			// (this refusal does not tell it: the next password sign-in does).
			return expired, deleteMFAChallenge(tx, key, ch)
		}
		if err := proof.check(a, f, now); err != nil {
			if fault.ErrorCode(err) == "" {
				return nil, err // the proof failed (a secret that will not unseal): not the caller's fault
			}
			ch.Failures++
			return err, tx.Bucket(bucketMFAChallenges).Put(key, encode(ch))
		}
		if err := putAccount(tx, a); err != nil {
			return nil, err
		}
		if err := deleteMFAChallenge(tx, key, ch); err != nil {
			return nil, err
		}
		sess.AccountID = a.ID
		return nil, signedIn(tx, a.Email, sess, access, refresh)
	})
}

func deleteMFAChallenge(tx Tx, key []byte, ch *mfaChallengeRecord) error {
	if err := tx.Bucket(bucketMFAChallenges).Delete(key); err != nil {
		return err
	}
	if err := tx.Bucket(bucketMFAChallengesByAccount).Delete(join(idPart(ch.AccountID), key)); err != nil {
		return err
	}
	return deleteExpiry(tx, ch.ExpiresAt, kindMFAChallenge, key)
}

// deleteAccountChallenges deletes every pending sign-in challenge of the
// account: a sign-in that had verified the password but not yet the second
// factor can no longer finish.
func deleteAccountChallenges(tx Tx, accountID string) error {
	prefix := idPart(accountID)
	keys, err := prefixKeys(tx.Bucket(bucketMFAChallengesByAccount), prefix)
	if err != nil {
		return err
	}
	for _, k := range keys {
		key := k[len(prefix):]
		ch, err := getRecord[mfaChallengeRecord](tx, bucketMFAChallenges, key)
		if err != nil {
			return err
		}
		if ch == nil {
			if err := tx.Bucket(bucketMFAChallengesByAccount).Delete(k); err != nil {
				return err
			}
			continue
		}
		if err := deleteMFAChallenge(tx, key, ch); err != nil {
			return err
		}
	}
	return nil
}
