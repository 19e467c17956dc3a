// Package maintenance runs the store's periodic upkeep beside the HTTP
// server: every interval it deletes expired records (kv.Store.Sweep) and
// the partial files of the transfers they took with them. Of the nodes
// sharing a store one runs it at a time, the holder of the "sweep" lease.
// cli starts a Runner beside the server and stops it on shutdown, as
// miniflux's scheduler is started beside its HTTP server.
package maintenance

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"

	"sealbox/blobs"
	"sealbox/kv"
	"sealbox/server/transfer"
)

// Options tune a Runner.
type Options struct {
	// Interval is how often expired records are deleted. The sweep lease
	// lasts three intervals, so a holder that misses a tick keeps it and
	// one that died hands it on after at most that long.
	Interval time.Duration
	// Holder names this run of the node among every lease holder: it must
	// start with the node's id and "/" (kv.Store.ReleaseLeasesOf), and
	// differ from the previous run's.
	Holder string
	Log    zerolog.Logger
}

// DefaultOptions are the production values: a sweep a minute.
func DefaultOptions() Options { return Options{Interval: time.Minute} }

// lease names the lease of the expiry sweeper: of the nodes sharing a
// store, only its holder sweeps.
const lease = "sweep"

// Runner sweeps one store and blob engine.
type Runner struct {
	store *kv.Store
	blobs blobs.Engine
	opts  Options
	// held is the sweep lease while this node holds it (see holds).
	held *kv.Lease
}

// New makes the runner over store and engine.
func New(store *kv.Store, engine blobs.Engine, opts Options) *Runner {
	if opts.Interval <= 0 {
		opts.Interval = DefaultOptions().Interval
	}
	return &Runner{store: store, blobs: engine, opts: opts}
}

// Run ticks once per interval until ctx ends, then gives the lease up, so
// another node sweeps at once instead of after it lapses.
func (r *Runner) Run(ctx context.Context) {
	t := time.NewTicker(r.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			if r.held != nil {
				if err := r.held.Release(); err != nil {
					r.opts.Log.Error().Err(err).Msg("release the sweep lease")
				}
			}
			return
		case <-t.C:
			r.Tick()
		}
	}
}

// Tick, on the node holding the sweep lease (taken here when free),
// deletes the expired records and the partial files of the transfers they
// took with them. It reports whether it swept.
func (r *Runner) Tick() bool {
	if !r.holds() {
		return false
	}
	if n, err := r.store.Sweep(); err != nil {
		r.opts.Log.Error().Err(err).Msg("sweep expired records")
	} else if n > 0 {
		r.opts.Log.Debug().Int("records", n).Msg("swept expired records")
	}
	// Expired sessions take their transfers with them.
	transfer.RemovePartials(r.store, r.blobs, r.opts.Log)
	return true
}

// holds confirms the lease this node holds (which renews it) or, when it
// holds none or lost it, takes it if free, and reports whether it holds it.
func (r *Runner) holds() bool {
	if r.held != nil {
		err := r.held.Confirm()
		if err == nil {
			return true
		}
		if !errors.Is(err, kv.ErrLeaseLost) {
			r.opts.Log.Error().Err(err).Msg("renew the sweep lease")
			return false
		}
		r.held.Release() // stops its renewals; the lease is another's or free
		r.held = nil
	}
	held, err := r.store.TakeLease(lease, r.opts.Holder, 3*r.opts.Interval)
	if errors.Is(err, kv.ErrLeaseHeld) {
		return false
	}
	if err != nil {
		r.opts.Log.Error().Err(err).Msg("take the sweep lease")
		return false
	}
	r.held = held
	return true
}
