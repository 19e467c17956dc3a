package kv

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrLeaseHeld is TakeLease's refusal of a lease another holder keeps live;
// the error it returns is a *LeaseHeldError, which names that holder.
var ErrLeaseHeld = errors.New("the lease is held by another holder")

// ErrLeaseLost reports that a Lease is no longer its holder's: a renewal
// found it taken by another holder, or expired, or the store could not be
// reached until its ttl had passed.
var ErrLeaseLost = errors.New("the lease was lost")

// LeaseHeldError is TakeLease's refusal: who holds the lease, and until
// when unless it is renewed.
type LeaseHeldError struct {
	Name, Holder string
	Until        time.Time
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("the lease %s is held by %s until %s", e.Name, e.Holder, e.Until.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrLeaseHeld) true.
func (e *LeaseHeldError) Is(target error) bool { return target == ErrLeaseHeld }

// Fence names a lease and a holder: a store write fenced by it is refused
// unless that holder holds that lease live, checked in the write's own
// transaction, so a holder that lost its lease (a stall past the ttl,
// another holder took it) writes nothing more even when it has not yet
// noticed.
type Fence struct {
	Lease, Holder string
}

// Lease is one holder's hold of a named lease (see TryLease) that renews
// itself every third of its ttl until it is released, so no caller writes a
// renewal loop. Work that must run under the lease watches Lost, and calls
// Confirm right before a step that must not happen without it; writes the
// store must refuse to a former holder check the lease in their own
// transaction as well (see AdvanceTransfer). Its methods are safe for
// concurrent use.
type Lease struct {
	s      *Store
	name   string
	holder string
	ttl    time.Duration

	// mu serializes renewals (the ticker's and Confirm's) and guards until,
	// the expiry the last successful renewal recorded.
	mu    sync.Mutex
	until time.Time

	lost     chan struct{}
	loseOnce sync.Once

	stop        chan struct{}
	done        chan struct{}
	releaseOnce sync.Once
	releaseErr  error
}

// TakeLease takes the lease name for holder for ttl, as TryLease does, and
// keeps renewing it until Release. A lease another holder keeps live is
// refused with a *LeaseHeldError (errors.Is ErrLeaseHeld).
func (s *Store) TakeLease(name, holder string, ttl time.Duration) (*Lease, error) {
	start := s.now() // no later than the take's own clock: a conservative expiry
	other, err := s.tryLease(name, holder, ttl)
	if err != nil {
		return nil, err
	}
	if other != nil {
		return nil, &LeaseHeldError{Name: name, Holder: other.Holder, Until: other.ExpiresAt}
	}
	l := &Lease{
		s: s, name: name, holder: holder, ttl: ttl, until: start.Add(ttl),
		lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go l.renewEvery(max(ttl/3, time.Millisecond))
	return l, nil
}

// Name is the lease's name; Holder the holder it was taken for. A write
// fenced by the lease names both.
func (l *Lease) Name() string   { return l.name }
func (l *Lease) Holder() string { return l.holder }

// Fence is what a write fenced by the lease names (see Fence).
func (l *Lease) Fence() Fence { return Fence{Lease: l.name, Holder: l.holder} }

// Lost is closed once a renewal finds the lease no longer the holder's
// (ErrLeaseLost). It is not closed by Release.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Confirm renews the lease at once and returns nil while the holder still
// holds it, ErrLeaseLost once it does not (Lost is then closed), or the
// store's error when it could not tell before the lease's ttl ran out. Work
// that must not proceed without the lease calls it right before the step.
func (l *Lease) Confirm() error { return l.renew() }

// Release stops the renewals and gives the lease up, so another holder may
// take it at once. It may be called more than once; after the first it
// returns the first call's result.
func (l *Lease) Release() error {
	l.releaseOnce.Do(func() {
		close(l.stop)
		<-l.done
		l.releaseErr = l.s.ReleaseLease(l.name, l.holder)
	})
	return l.releaseErr
}

func (l *Lease) renewEvery(d time.Duration) {
	defer close(l.done)
	ticks, stop := l.s.ticker(d)
	defer stop()
	for {
		select {
		case <-l.stop:
			return
		case <-l.lost:
			return
		case <-ticks:
			// An error is retried at the next tick; renew declares the
			// lease lost once its ttl has passed without a renewal.
			l.renew()
		}
	}
}

// renew renews the lease once (see Confirm).
func (l *Lease) renew() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.lost:
		return ErrLeaseLost
	default:
	}
	held, until, err := l.s.renewLease(l.name, l.holder, l.ttl)
	switch {
	case err != nil && reached(l.until, l.s.now()):
		l.lose()
		return fmt.Errorf("%w: the store could not renew it in time: %w", ErrLeaseLost, err)
	case err != nil:
		return err
	case !held:
		l.lose()
		return ErrLeaseLost
	}
	l.until = until
	return nil
}

func (l *Lease) lose() { l.loseOnce.Do(func() { close(l.lost) }) }

// realTicker is the default Options.Ticker.
func realTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}
