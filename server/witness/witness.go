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
		return Witness{}, fmt.Errorf("witness %s: %q is not an http(s) URL", v.Name(), base)
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
	// timeout.
	Client *http.Client
	Log    zerolog.Logger
}

// DefaultOptions are the production values: no witnesses, and a checkpoint
// every 5s at most.
func DefaultOptions() Options { return Options{Interval: 5 * time.Second} }

// Worker has the log sign checkpoints and gathers cosignatures for them.
type Worker struct {
	store *kv.Store
	log   *translog.Log
	opts  Options
	// node holds the lease among the nodes sharing the store.
	node string
}

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
	var b [16]byte
	rand.Read(b[:])
	return &Worker{store: store, log: log, opts: opts, node: "witness-" + hex.EncodeToString(b[:])}
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
			if err := w.store.ReleaseLease(lease, w.node); err != nil {
				w.opts.Log.Error().Err(err).Msg("release the witness lease")
			}
			return
		case <-t.C:
		}
	}
}

// Round, on the node holding the lease, signs a checkpoint of the tree when
// it grew and submits the newest checkpoint to every witness that has not
// cosigned it yet. A round with nothing to do takes no lease, so an idle
// server writes nothing (a NAS's disk may sleep). It logs what fails and
// reports whether it held the lease.
func (w *Worker) Round(ctx context.Context) bool {
	if work, err := w.pending(); err != nil || !work {
		if err != nil {
			w.opts.Log.Error().Err(err).Msg("read the transparency log's checkpoints")
		}
		return false
	}
	held, err := w.store.TryLease(lease, w.node, 3*w.opts.Interval)
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
	var wg sync.WaitGroup
	for _, wit := range w.opts.Witnesses {
		// A witness that cosigned this checkpoint has nothing new to see.
		if latest.Size == cp.Size && latest.Root == cp.Root && latest.Cosignatures[wit.VerifierKey] != nil {
			continue
		}
		wg.Go(func() {
			if err := w.submit(ctx, wit, cp, states[wit.VerifierKey].Size); err != nil {
				w.opts.Log.Error().Err(err).Str("witness", wit.Name()).Msg("submit a checkpoint to a witness")
			}
		})
	}
	wg.Wait()
	return true
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
