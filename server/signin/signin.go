// Package signin runs the password work of signing in, registering and
// changing a password, apart from HTTP: a counted verification (the
// lockout check, the store's admission and the attempt gate, argon2id,
// the failure recorded) and the hashing of a new password. The handlers
// decode, call a Checker and encode what it returns.
package signin

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/server/password"
	"sealbox/server/ratelimit"
)

// Options tune a Checker.
type Options struct {
	// Lockout is how many failures lock an address, and for how long.
	Lockout kv.LockoutPolicy
	// AttemptTTL bounds how long a verification in flight counts when its
	// node died before ending it: longer than any verification, waits for
	// the hasher included.
	AttemptTTL time.Duration
	// Entry names one verification among every node's, never the same
	// twice (the server's claim ids).
	Entry func() string
	// Log receives what fails in the background of a verification.
	Log zerolog.Logger
}

// Hasher is what a Checker needs of *password.Hasher: a verification of
// an empty encoded hash (an address no account has) must cost what a real
// one does and fail.
type Hasher interface {
	Hash(ctx context.Context, password string) (string, error)
	Verify(ctx context.Context, encoded, password string) (bool, error)
}

// Checker runs password work against one store with one hasher. It is safe
// for concurrent use.
type Checker struct {
	store  *kv.Store
	hasher Hasher
	// gate is where verifications wait for the store to admit them.
	gate *ratelimit.Gate
	opts Options
}

// New returns a Checker over store that hashes with hasher.
func New(store *kv.Store, hasher Hasher, opts Options) *Checker {
	return &Checker{store: store, hasher: hasher, gate: ratelimit.NewGate(0, 0), opts: opts}
}

// hashRetry is the Retry-After of a check that could not start in time:
// about one hash.
const hashRetry = time.Second

// refused turns a wait for a hashing slot that ran out into the refusal
// its callers see: error.limit.hash_queue, counted under hash-wait. Any
// other error (the context's end among them) is returned as it is.
func refused(err error) error {
	if errors.Is(err, password.ErrBusy) {
		return fault.LimitErrorf(fault.ECodeHashQueueFull, "hash-wait", hashRetry, "every password check is busy and this one could not start in time; try again shortly")
	}
	return err
}

// Hash hashes a new password. It returns ctx's error when ctx ends first
// and error.limit.hash_queue when no hashing slot came free within the
// hasher's wait.
func (c *Checker) Hash(ctx context.Context, pw string) (string, error) {
	hash, err := c.hasher.Hash(ctx, pw)
	return hash, refused(err)
}

// Verify runs one counted password verification for the account
// registered under email, which may not exist. The lockout check comes
// first, and the store admits the verification only while the failures it
// counted plus the verifications in flight on every node stay under the
// limit (the gate is where it waits for that); then argon2id runs against
// the stored hash, or with the same work for an address no account has, and
// a wrong password is counted. It returns the account when the password is
// right; error.auth.account_locked (423) while the address is locked or when
// the operator disabled the account (told only to a caller who knows the
// password); error.auth.invalid_credentials for a wrong password or an
// unknown address alike; error.limit.hash_queue when no hashing slot came free in time;
// and ctx's error, counting nothing, when ctx ends first.
func (c *Checker) Verify(ctx context.Context, email, pw string) (*kv.Account, error) {
	var acct *kv.Account
	entry := c.opts.Entry()
	err := c.gate.Enter(ctx, func() (bool, error) {
		a, admitted, err := c.store.EnterPasswordAttempt(email, entry, c.opts.Lockout, c.opts.AttemptTTL)
		acct = a
		return admitted, err
	})
	if err != nil {
		return nil, refused(err)
	}
	ended := false
	defer func() {
		if !ended {
			c.leave(email, entry)
		}
	}()
	stored := ""
	if acct != nil {
		stored = acct.PasswordHash
	}
	ok, err := c.hasher.Verify(ctx, stored, pw)
	if err != nil {
		return nil, refused(err)
	}
	if !ok {
		// Counted and ended in one transaction; a failure to record it
		// leaves the entry to the deferred leave.
		if err := c.store.PasswordFailed(email, entry, c.opts.Lockout); err != nil {
			return nil, err
		}
		ended = true
		c.gate.Left()
		return nil, fault.Errorf(fault.ECodeInvalidCredentials, "the email or password is wrong")
	}
	if acct.Disabled {
		return nil, fault.Errorf(fault.ECodeAccountLocked, "the operator has disabled this account")
	}
	return acct, nil
}

// leave ends a verification the store admitted and wakes this node's
// waiters. An entry the store could not delete lapses with its ttl.
func (c *Checker) leave(email, entry string) {
	if err := c.store.LeavePasswordAttempt(email, entry); err != nil {
		c.opts.Log.Error().Err(err).Msg("end a password verification in flight")
	}
	c.gate.Left()
}

// CountFailure counts a failure against the address without a
// verification: the price of a second-factor challenge handed out, so an
// attacker who knows the password cannot guess codes without limit.
func (c *Checker) CountFailure(email string) error {
	return c.store.CountPasswordFailure(email, c.opts.Lockout)
}
