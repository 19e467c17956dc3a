// Package password hashes and verifies account passwords with argon2id.
package password

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/argon2"
)

// Params are argon2id's cost parameters. They are stored inside every
// hash, so raising the defaults later keeps old hashes verifiable.
type Params struct {
	Time      uint32
	MemoryKiB uint32
	Threads   uint8
}

// Default is server/PROTOCOL.md §2's t=2, m=64 MiB, p=2.
var Default = Params{Time: 2, MemoryKiB: 64 << 10, Threads: 2}

const (
	argonSaltLen = 16
	argonKeyLen  = 32
)

// Hasher hashes and verifies passwords. At most Slots() argon2id
// computations run at once (GOMAXPROCS): a login flood queues for a slot
// instead of allocating 64 MiB per request. The queue is bounded by waiting
// time, not by a count of waiters (server/PROTOCOL.md §2): a burst of
// ordinary clients is queued and served in arrival order, and only a call
// that could not start within the wait fails, with ErrBusy. A call whose
// context ends while it waits leaves the queue, and one whose context has
// ended never starts argon2id: work nobody waits for is never done.
type Hasher struct {
	params Params
	rand   io.Reader
	// sem holds a token per running computation. Callers blocked sending
	// to it are queued by the runtime in the order they blocked, and a
	// freed slot passes straight to the first of them, so a newcomer
	// never overtakes a waiter.
	sem chan struct{}
	// wait bounds how long a call waits for a slot; expire starts that
	// bound (a timer outside tests) and returns its channel and a stop.
	wait    time.Duration
	expire  func(time.Duration) (<-chan time.Time, func() bool)
	waiting atomic.Int64
}

// ErrBusy is returned when no hashing slot came free within the wait.
var ErrBusy = errors.New("password: no hashing slot came free within the wait")

// Slots is how many argon2id computations run at once: GOMAXPROCS.
func Slots() int { return runtime.GOMAXPROCS(0) }

// DefaultWait is the default bound of a call's wait for a slot: long
// enough for a burst of a few hundred sign-ins on two cores to be served.
const DefaultWait = 10 * time.Second

// NewHasher makes hashes with p and salts from rand; a call waits at most
// wait for a slot (DefaultWait when wait is not positive). It is safe for
// concurrent use.
func NewHasher(p Params, rand io.Reader, wait time.Duration) *Hasher {
	if wait <= 0 {
		wait = DefaultWait
	}
	return &Hasher{params: p, rand: rand, sem: make(chan struct{}, Slots()), wait: wait, expire: startTimer}
}

func startTimer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

// Waiting is how many calls wait for a slot now.
func (h *Hasher) Waiting() int64 { return h.waiting.Load() }

// acquire takes a slot, waiting for one in arrival order. It returns ctx's
// error when ctx ends first and ErrBusy when the wait runs out.
func (h *Hasher) acquire(ctx context.Context) error {
	select {
	case h.sem <- struct{}{}:
		return nil
	default:
	}
	h.waiting.Add(1)
	defer h.waiting.Add(-1)
	expired, stop := h.expire(h.wait)
	defer stop()
	select {
	case h.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-expired:
		return ErrBusy
	}
}

// key derives the argon2id key once a slot is free. It returns ctx's error
// without hashing when ctx ends first, also when it had ended before, and
// ErrBusy when no slot came free within the wait.
func (h *Hasher) key(ctx context.Context, password string, salt []byte, p Params) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := h.acquire(ctx); err != nil {
		return nil, err
	}
	defer func() { <-h.sem }()
	// A slot and the context's end may come at once: the slot does not
	// make the work wanted again.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return argon2.IDKey([]byte(password), salt, p.Time, p.MemoryKiB, p.Threads, argonKeyLen), nil
}

// Hash returns the PHC-format argon2id hash of password, or ctx's error
// or ErrBusy without one (see Hasher).
func (h *Hasher) Hash(ctx context.Context, password string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := io.ReadFull(h.rand, salt); err != nil {
		return "", err
	}
	p := h.params
	k, err := h.key(ctx, password, salt, p)
	if err != nil {
		return "", err
	}
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, p.MemoryKiB, p.Time, p.Threads, enc.EncodeToString(salt), enc.EncodeToString(k)), nil
}

// Verify reports whether password matches encoded. An empty encoded hash
// (no such account) costs one argon2id computation with the current
// parameters, as a known account does, and always fails. It returns ctx's
// error or ErrBusy without verifying (see Hasher).
func (h *Hasher) Verify(ctx context.Context, encoded, password string) (bool, error) {
	if encoded == "" {
		_, err := h.key(ctx, password, make([]byte, argonSaltLen), h.params)
		return false, err
	}
	p, salt, want, err := parseArgon2(encoded)
	if err != nil {
		return false, err
	}
	got, err := h.key(ctx, password, salt, p)
	if err != nil {
		return false, err
	}
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

func parseArgon2(encoded string) (Params, []byte, []byte, error) {
	var p Params
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" || parts[2] != fmt.Sprintf("v=%d", argon2.Version) {
		return p, nil, nil, fmt.Errorf("unsupported password hash format")
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.MemoryKiB, &p.Time, &p.Threads); err != nil {
		return p, nil, nil, fmt.Errorf("password hash parameters: %w", err)
	}
	salt, err := base64.RawStdEncoding.DecodeString(parts[4])
	if err != nil {
		return p, nil, nil, fmt.Errorf("password hash salt: %w", err)
	}
	key, err := base64.RawStdEncoding.DecodeString(parts[5])
	if err != nil {
		return p, nil, nil, fmt.Errorf("password hash key: %w", err)
	}
	return p, salt, key, nil
}
