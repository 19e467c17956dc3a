// Package witness has the transparency log sign its checkpoints in the
// background and has witnesses cosign them (C2SP tlog-witness and
// tlog-cosignature), so that a client who trusts a witness, not the server,
// knows every client is shown one history of the log (server/PROTOCOL.md
// §16). cli starts it beside the HTTP server, which only serves the bytes
// translog hands out: signing is never on the publish path, and happens at
// most once per interval.
package witness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"filippo.io/torchwood"
	"github.com/rs/zerolog"
	"golang.org/x/mod/sumdb/note"

	"sealbox/kv"
	"sealbox/server/translog"
)

// Witness is one witness the log submits its checkpoints to.
type Witness struct {
	// VerifierKey is the witness's cosignature verifier key (C2SP
	// signed-note vkey, algorithm 0x04).
	VerifierKey string
	// URL is the witness's base URL: checkpoints go to URL/add-checkpoint.
	URL      string
	verifier *torchwood.CosignatureVerifier
}

// Name is the witness's name, from its key: what its cosignature lines say.
func (w Witness) Name() string { return w.verifier.Name() }

// Redacted is URL for a log line or an error: a user name and password in it
// are credentials, so the user information is replaced whole.
func (w Witness) Redacted() string { return redact(w.URL) }

// redact replaces the user information of the URL raw, if any.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an unreadable URL)"
	}
	if u.User != nil {
		u.User = url.User("xxxxx")
	}
	return u.String()
}

// Verifier verifies the witness's cosignatures.
func (w Witness) Verifier() note.Verifier { return w.verifier }

// Parse reads a witness given as VKEY=URL.
func Parse(spec string) (Witness, error) {
	vkey, base, ok := strings.Cut(strings.TrimSpace(spec), "=")
	if !ok {
		return Witness{}, fmt.Errorf("witness %q: want VKEY=URL", spec)
	}
	v, err := torchwood.NewCosignatureVerifier(vkey)
	if err != nil {
		return Witness{}, fmt.Errorf("witness %q: not a cosignature verifier key: %v", vkey, err)
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Witness{}, fmt.Errorf("witness %s: %q is not an http(s) URL", v.Name(), redact(base))
	}
	return Witness{VerifierKey: vkey, URL: strings.TrimSuffix(base, "/"), verifier: v}, nil
}

// Options tune a Worker.
type Options struct {
	Witnesses []Witness
	// Quorum is how many witnesses must cosign a checkpoint before it is the
	// one served as witnessed.
	Quorum int
	// Interval is the least time between two signed checkpoints, and
	// between two rounds of submissions.
	Interval time.Duration
	// Client makes the requests to witnesses. Default: one with a 10s
	// timeout. Whichever it is, it follows no redirect.
	Client *http.Client
	Log    zerolog.Logger
	// Node is the id of the node the worker runs on: its lease is held as
	// Node/<random>, so the node's next run releases it at start
	// (kv.Store.ReleaseLeasesOf) instead of waiting for it to lapse.
	Node string
	// Now is the clock the backoff of a faulty witness is timed with.
	// Default: time.Now.
	Now func() time.Time
}

// DefaultOptions are the production values: no witnesses, and a checkpoint
// every 5s at most.
func DefaultOptions() Options { return Options{Interval: 5 * time.Second} }

// Worker has the log sign checkpoints and gathers cosignatures for them.
type Worker struct {
	store *kv.Store
	log   *translog.Log
	opts  Options
	// holder holds the lease among the nodes sharing the store: Node/<random>.
	holder string

	// submissions are the submissions Round started that have not ended.
	submissions sync.WaitGroup
	mu          sync.Mutex
	// busy holds the witnesses (by verifier key) a submission is under way
	// to: a slow one is not asked again before it answers.
	busy map[string]bool
	// backoff holds the witnesses that answered wrongly, and when to ask
	// them again.
	backoff map[string]backoff
}

// backoff is a faulty witness's wait: after the nth wrong answer in a row
// it is asked again after n doublings of the interval, up to maxBackoff.
type backoff struct {
	faults int
	until  time.Time
}

// maxBackoff is the longest wait before a faulty witness is asked again.
const maxBackoff = 5 * time.Minute

// lease names the lease whose holder, alone among the nodes sharing a
// store, signs and submits.
const lease = "witness"

// New makes a worker over store whose transparency log is log.
func New(store *kv.Store, log *translog.Log, opts Options) *Worker {
	if opts.Interval <= 0 {
		opts.Interval = DefaultOptions().Interval
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: 10 * time.Second}
	}
	// A redirect is answered, never followed: a 307 would send the
	// checkpoint on to wherever the witness points, and a 302 would turn the
	// POST into a GET of any address, an internal one included, every
	// interval (server/PROTOCOL.md §16).
	client := *opts.Client
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	opts.Client = &client
	if opts.Now == nil {
		opts.Now = time.Now
	}
	var b [16]byte
	rand.Read(b[:])
	return &Worker{store: store, log: log, opts: opts, holder: opts.Node + "/" + hex.EncodeToString(b[:]),
		busy: map[string]bool{}, backoff: map[string]backoff{}}
}

// Run does a round at once and then one per interval until ctx ends, then
// gives up the lease so another node takes over at once.
func (w *Worker) Run(ctx context.Context) {
	t := time.NewTicker(w.opts.Interval)
	defer t.Stop()
	for {
		w.Round(ctx)
		select {
		case <-ctx.Done():
			w.Wait()
			if err := w.store.ReleaseLease(lease, w.holder); err != nil {
				w.opts.Log.Error().Err(err).Msg("release the witness lease")
			}
			return
		case <-t.C:
		}
	}
}

// Round, on the node holding the lease, signs a checkpoint of the tree when
// it grew and starts submitting the newest checkpoint to every witness that
// has not cosigned it yet, unless a submission to it is still under way or
// it is waiting out a backoff. It does not wait for the submissions: each
// witness answers in its own time, so a slow one delays its own cosignature
// only (Wait waits for them). A round with nothing to do takes no lease, so
// an idle server writes nothing (a NAS's disk may sleep). It logs what fails
// and reports whether it held the lease.
func (w *Worker) Round(ctx context.Context) bool {
	if work, err := w.pending(); err != nil || !work {
		if err != nil {
			w.opts.Log.Error().Err(err).Msg("read the transparency log's checkpoints")
		}
		return false
	}
	// Taken round by round, not held as a kv.Lease: a kv.Lease renews
	// itself every third of its ttl, a write an idle server must not make.
	held, err := w.store.TryLease(lease, w.holder, 3*w.opts.Interval)
	if err != nil {
		w.opts.Log.Error().Err(err).Msg("take the witness lease")
		return false
	}
	if !held {
		return false
	}
	cp, err := w.log.Sign()
	if err != nil {
		w.opts.Log.Error().Err(err).Msg("sign a checkpoint of the transparency log")
		return true
	}
	// An empty tree has nothing to witness.
	if cp.Size == 0 || len(w.opts.Witnesses) == 0 {
		return true
	}
	states, err := w.store.WitnessStates()
	if err != nil {
		w.opts.Log.Error().Err(err).Msg("read the witnesses' state")
		return true
	}
	latest, _, err := w.store.Checkpoints()
	if err != nil {
		w.opts.Log.Error().Err(err).Msg("read the cosignatures")
		return true
	}
	for _, wit := range w.opts.Witnesses {
		// A witness that cosigned this checkpoint has nothing new to see.
		if latest.Size == cp.Size && latest.Root == cp.Root && latest.Cosignatures[wit.VerifierKey] != nil {
			continue
		}
		if !w.start(wit.VerifierKey) {
			continue
		}
		w.submissions.Go(func() {
			fault, err := w.submit(ctx, wit, cp, states[wit.VerifierKey].Size)
			if err != nil {
				w.opts.Log.Error().Err(err).Str("witness", wit.Name()).Msg("submit a checkpoint to a witness")
			}
			w.done(wit.VerifierKey, fault)
		})
	}
	return true
}

// Wait waits for the submissions that rounds started to end.
func (w *Worker) Wait() { w.submissions.Wait() }

// start reports whether a submission to the witness vkey may start now, and
// marks it under way if so.
func (w *Worker) start(vkey string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.busy[vkey] || w.opts.Now().Before(w.backoff[vkey].until) {
		return false
	}
	w.busy[vkey] = true
	return true
}

// done ends a submission to the witness vkey: after a wrong answer the
// witness waits out a backoff twice as long as after the one before;
// any other outcome ends its backoff.
func (w *Worker) done(vkey string, fault bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.busy, vkey)
	if !fault {
		delete(w.backoff, vkey)
		return
	}
	b := w.backoff[vkey]
	wait := maxBackoff
	if b.faults < 16 {
		wait = min(w.opts.Interval<<b.faults, maxBackoff)
	}
	b.faults++
	b.until = w.opts.Now().Add(wait)
	w.backoff[vkey] = b
}

// pending reports, from reads alone, whether a round has work: the tree grew
// past the newest checkpoint, or a witness has not cosigned that checkpoint
// (an empty tree has nothing to witness).
func (w *Worker) pending() (bool, error) {
	last, err := w.store.LastCheckpoint()
	if err != nil {
		return false, err
	}
	tree, err := w.store.LogTree()
	if err != nil {
		return false, err
	}
	if last == nil || last.Size < tree.N {
		return true, nil
	}
	if last.Size == 0 || len(w.opts.Witnesses) == 0 {
		return false, nil
	}
	latest, _, err := w.store.Checkpoints()
	if err != nil {
		return false, err
	}
	for _, wit := range w.opts.Witnesses {
		if latest.Size != last.Size || latest.Root != last.Root || latest.Cosignatures[wit.VerifierKey] == nil {
			return true, nil
		}
	}
	return false, nil
}

// cosignatureLine finds, among the signature lines a witness answered, the
// one that is its valid cosignature of signedNote.
func cosignatureLine(wit Witness, signedNote, answer []byte) ([]byte, error) {
	for line := range strings.Lines(string(answer)) {
		if !strings.HasSuffix(line, "\n") {
			break
		}
		n, err := note.Open(append(append([]byte{}, signedNote...), line...), note.VerifierList(wit.verifier))
		if err == nil && len(n.Sigs) == 1 && n.Sigs[0].Name == wit.Name() && n.Sigs[0].Hash == wit.verifier.KeyHash() {
			return []byte(line), nil
		}
	}
	return nil, errors.New("the answer holds no valid cosignature by the witness's key")
}
