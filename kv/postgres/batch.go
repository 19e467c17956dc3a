package postgres

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"sealbox/kv/engine"
)

// batcher gives an engine that does not batch commits by nature
// (PostgreSQL) what bbolt's Batch gives it: concurrent callers' functions
// run together in one update transaction. On PostgreSQL that turns writers
// who would conflict under SERIALIZABLE (every lifecycle op of an album
// moves the album's sync_seq) into one transaction that applies them in
// turn, with one commit and one WAL flush for all of them.
//
// The rules are bbolt's: a batch runs when it holds maxSize calls or
// maxDelay after its first call; a function that fails is taken out and
// run again alone, in a transaction of its own, by its caller, and the rest
// run again without it. So a function may run more than once and must set
// its results afresh on every run, as every update function must anyway.
type batcher struct {
	update   func(func(engine.Tx) error) error
	maxSize  int
	maxDelay time.Duration

	mu      sync.Mutex
	pending *batch
	// committing is held by the batch whose transaction runs: batches of
	// one process commit one at a time, as bbolt's do, so two of them never
	// conflict with each other (on one album they always would), and the
	// calls that arrive meanwhile gather in the next batch.
	committing sync.Mutex
}

type batch struct {
	b     *batcher
	timer *time.Timer
	once  sync.Once
	calls []batchCall
}

type batchCall struct {
	fn func(engine.Tx) error
	// reads are keys fn will read, read for the whole batch in one round
	// trip before the functions run (BatchReading).
	reads []engine.Key
	err   chan<- error
}

// errTrySolo tells a caller that its function failed inside a batch and is
// to run alone.
var errTrySolo = errors.New("kv: batch function returned an error and should be re-run solo")

// Batch runs fn in one update with the calls that arrive meanwhile.
func (b *batcher) Batch(fn func(engine.Tx) error) error { return b.BatchReading(nil, fn) }

// BatchReading is Batch for a function that will read keys: the batch reads
// the keys of all its calls in one round trip before it runs them, so the
// calls, which run one after another, do not each wait for their own.
func (b *batcher) BatchReading(keys []engine.Key, fn func(engine.Tx) error) error {
	errc := make(chan error, 1)
	b.mu.Lock()
	if b.pending == nil || len(b.pending.calls) >= b.maxSize {
		bt := &batch{b: b}
		bt.timer = time.AfterFunc(b.maxDelay, bt.trigger)
		b.pending = bt
	}
	bt := b.pending
	bt.calls = append(bt.calls, batchCall{fn: fn, reads: keys, err: errc})
	if len(bt.calls) >= b.maxSize {
		go bt.trigger()
	}
	b.mu.Unlock()
	if err := <-errc; !errors.Is(err, errTrySolo) {
		return err
	}
	return b.update(fn)
}

func (bt *batch) trigger() { bt.once.Do(bt.run) }

// run waits for the batch before it to commit, takes the batch out of the
// batcher (calls that came while it waited joined it) and commits its calls
// together,
// taking out each call that fails until the rest commit (or fail for a
// reason of the transaction's own, which every remaining caller gets).
func (bt *batch) run() {
	bt.b.committing.Lock()
	defer bt.b.committing.Unlock()
	bt.b.mu.Lock()
	bt.timer.Stop()
	if bt.b.pending == bt {
		bt.b.pending = nil
	}
	bt.b.mu.Unlock()
	for len(bt.calls) > 0 {
		failed := -1
		err := bt.b.update(func(tx engine.Tx) error {
			failed = -1
			if err := bt.prefetch(tx); err != nil {
				return err
			}
			for i, c := range bt.calls {
				if err := callSafely(c.fn, tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		if failed < 0 {
			for _, c := range bt.calls {
				c.err <- err
			}
			return
		}
		c := bt.calls[failed]
		bt.calls = append(bt.calls[:failed], bt.calls[failed+1:]...)
		c.err <- errTrySolo
	}
}

// prefetch reads the keys of the batch's calls in one round trip.
func (bt *batch) prefetch(tx engine.Tx) error {
	var keys []engine.Key
	for _, c := range bt.calls {
		keys = append(keys, c.reads...)
	}
	p, ok := tx.(engine.Prefetcher)
	if !ok || len(keys) == 0 {
		return nil
	}
	return p.Prefetch(keys)
}

// callSafely runs fn, turning a panic into an error so that one caller's
// panic fails its own call (re-run, and so panicking, in its own goroutine)
// rather than the goroutine that runs everybody's batch.
func callSafely(fn func(engine.Tx) error, tx engine.Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("kv: panic in a batched update: %v", p)
		}
	}()
	return fn(tx)
}
