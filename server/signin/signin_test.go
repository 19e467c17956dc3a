package signin_test

import (
	"context"
	"crypto/rand"
	"errors"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/kv/kvtest"
	"sealbox/server/password"
	"sealbox/server/signin"
)

var cheap = password.Params{Time: 1, MemoryKiB: 64, Threads: 1}

const rightPassword = "correct horse battery"

// fixture is a Checker over a real bbolt store holding one account,
// alice@example.org, whose password hash was made with stored.
type fixture struct {
	store   *kv.Store
	checker *signin.Checker
	hasher  *password.Hasher
	alice   *kv.Account
}

func newFixture(t *testing.T, hasher *password.Hasher, stored password.Params, failures int) *fixture {
	t.Helper()
	s, err := kvtest.Open(filepath.Join(t.TempDir(), "sealbox.db"), kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	hash, err := password.NewHasher(stored, rand.Reader, 0).Hash(t.Context(), rightPassword)
	if err != nil {
		t.Fatal(err)
	}
	alice := &kv.Account{ID: "acct-alice", Email: "alice@example.org", PasswordHash: hash, CreatedAt: time.Now()}
	if err := s.AddAccount(alice); err != nil {
		t.Fatal(err)
	}
	return &fixture{store: s, checker: signin.New(s, hasher, options(failures)), hasher: hasher, alice: alice}
}

// entries numbers the verifications of every Checker of a test binary.
var entries atomic.Uint64

// options lock an address for 15 minutes after failures failures.
func options(failures int) signin.Options {
	return signin.Options{
		Lockout:    kv.LockoutPolicy{Failures: failures, Window: 15 * time.Minute},
		AttemptTTL: time.Minute,
		Entry:      func() string { return "node/" + strconv.FormatUint(entries.Add(1), 10) },
		Log:        zerolog.Nop(),
	}
}

func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if got := fault.ErrorCode(err); got != code {
		t.Fatalf("%s: %v (code %q), want %s", what, err, got, code)
	}
}

// TestVerify: the right password returns the account; a wrong one and an
// unknown address answer alike and count against the address; at the limit
// the address is locked, for the right password too; a disabled account is
// told so only to a caller who knows its password.
func TestVerify(t *testing.T) {
	f := newFixture(t, password.NewHasher(cheap, rand.Reader, 0), cheap, 3)
	ctx := t.Context()
	acct, err := f.checker.Verify(ctx, f.alice.Email, rightPassword)
	if err != nil || acct.ID != f.alice.ID {
		t.Fatalf("the right password: %+v, %v", acct, err)
	}
	for _, email := range []string{f.alice.Email, "nobody@example.org"} {
		for i := range 3 {
			_, err := f.checker.Verify(ctx, email, "wrong password")
			wantCode(t, email+" wrong password "+strconv.Itoa(i), err, fault.ECodeInvalidCredentials)
		}
		_, err := f.checker.Verify(ctx, email, rightPassword)
		wantCode(t, email+" after 3 failures", err, fault.ECodeAccountLocked)
	}

	f = newFixture(t, password.NewHasher(cheap, rand.Reader, 0), cheap, 3)
	if _, err := f.store.SetDisabled(f.alice.Email, true); err != nil {
		t.Fatal(err)
	}
	_, err = f.checker.Verify(ctx, f.alice.Email, "wrong password")
	wantCode(t, "disabled, wrong password", err, fault.ECodeInvalidCredentials)
	_, err = f.checker.Verify(ctx, f.alice.Email, rightPassword)
	wantCode(t, "disabled, right password", err, fault.ECodeAccountLocked)
}

// TestCountFailure: a second-factor challenge handed out counts as a
// failure of the address.
func TestCountFailure(t *testing.T) {
	f := newFixture(t, password.NewHasher(cheap, rand.Reader, 0), cheap, 2)
	for range 2 {
		if err := f.checker.CountFailure(f.alice.Email); err != nil {
			t.Fatal(err)
		}
	}
	_, err := f.checker.Verify(t.Context(), f.alice.Email, rightPassword)
	wantCode(t, "after two challenges", err, fault.ECodeAccountLocked)
}

// TestAbandonedVerifyCountsNothing: a verification whose caller left
// returns the context's error, counts no failure and ends its entry in
// flight, so with a limit of one the next caller is admitted at once.
func TestAbandonedVerifyCountsNothing(t *testing.T) {
	f := newFixture(t, password.NewHasher(cheap, rand.Reader, 0), cheap, 1)
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := f.checker.Verify(gone, f.alice.Email, "wrong password"); !errors.Is(err, context.Canceled) {
		t.Fatalf("an abandoned verification: %v, want context.Canceled", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if acct, err := f.checker.Verify(ctx, f.alice.Email, rightPassword); err != nil || acct == nil {
		t.Fatalf("the next verification: %v, want admitted and right", err)
	}
}

// recordingHasher is the real hasher, noting the encoded hash of every
// verification it is asked for.
type recordingHasher struct {
	*password.Hasher
	mu       sync.Mutex
	verified []string
}

func (h *recordingHasher) Verify(ctx context.Context, encoded, pw string) (bool, error) {
	h.mu.Lock()
	h.verified = append(h.verified, encoded)
	h.mu.Unlock()
	return h.Hasher.Verify(ctx, encoded, pw)
}

// TestUnknownAddressDoesTheWork: a verification for an address no account
// has goes to the hasher once, as a known one does, with the empty hash
// that costs one argon2id computation with the current parameters (package
// password), so the answer's timing does not tell whether the account
// exists; and it is answered and counted as a wrong password is.
func TestUnknownAddressDoesTheWork(t *testing.T) {
	hasher := &recordingHasher{Hasher: password.NewHasher(cheap, rand.Reader, 0)}
	f := newFixture(t, hasher.Hasher, cheap, 1)
	checker := signin.New(f.store, hasher, options(1))
	_, err := checker.Verify(t.Context(), f.alice.Email, "wrong password")
	wantCode(t, "a known address", err, fault.ECodeInvalidCredentials)
	_, err = checker.Verify(t.Context(), "nobody@example.org", "wrong password")
	wantCode(t, "an unknown address", err, fault.ECodeInvalidCredentials)
	if len(hasher.verified) != 2 || hasher.verified[0] != f.alice.PasswordHash || hasher.verified[1] != "" {
		t.Fatalf("the hasher verified against %q, want the stored hash then the empty one", hasher.verified)
	}
	_, err = checker.Verify(t.Context(), "nobody@example.org", "wrong password")
	wantCode(t, "an unknown address at the limit", err, fault.ECodeAccountLocked)
}

// TestHashWaitRanOut: a hasher whose wait for a slot ran out refuses with
// the hash-wait limit, counted under its flag with a Retry-After of about
// one hash.
func TestHashWaitRanOut(t *testing.T) {
	f := newFixture(t, password.NewHasher(cheap, rand.Reader, 0), cheap, 1)
	checker := signin.New(f.store, busyHasher{}, options(1))
	_, verr := checker.Verify(t.Context(), f.alice.Email, rightPassword)
	_, herr := checker.Hash(t.Context(), "a new password")
	for _, err := range []error{verr, herr} {
		var e *fault.Error
		if !errors.As(err, &e) || e.Code != fault.ECodeHashQueueFull || e.Limit != "hash-wait" || e.RetryAfter != time.Second {
			t.Fatalf("the refusal: %v, want error.limit.hash_queue counted under hash-wait with a Retry-After of 1s", err)
		}
	}
	// The refused verification ended its entry and counted nothing: with
	// a limit of one, the next is admitted at once.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := f.checker.Verify(ctx, f.alice.Email, rightPassword); err != nil {
		t.Fatalf("after a refusal: %v", err)
	}
}

// busyHasher is a hasher whose wait for a slot always runs out.
type busyHasher struct{}

func (busyHasher) Hash(context.Context, string) (string, error) { return "", password.ErrBusy }
func (busyHasher) Verify(context.Context, string, string) (bool, error) {
	return false, password.ErrBusy
}

// TestHash: a new password's hash verifies; a full hasher refuses with the
// hash-wait limit, and a caller who left gets the context's error.
func TestHash(t *testing.T) {
	f := newFixture(t, password.NewHasher(cheap, rand.Reader, 0), cheap, 3)
	hash, err := f.checker.Hash(t.Context(), "a new password")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := f.hasher.Verify(t.Context(), hash, "a new password"); !ok || err != nil {
		t.Fatalf("the new hash does not verify: %v %v", ok, err)
	}
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := f.checker.Hash(gone, "a new password"); !errors.Is(err, context.Canceled) {
		t.Fatalf("an abandoned hash: %v, want context.Canceled", err)
	}
}
