package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"filippo.io/torchwood"
	"github.com/spf13/cobra"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// Audit checks a sealbox transparency log from outside, trusting neither
// the server nor the network: the log's key and the witnesses are the
// person's own choice, and the last checkpoint seen is kept on their
// machine. It reads only the log's key, checkpoint and tiles.
type Audit struct {
	Server    string
	LogKey    string
	Witnesses []string
	// Quorum is how many of Witnesses must have cosigned the checkpoint.
	Quorum int
	// Account, when set, lists that account's directory records.
	Account string
	// StateDir keeps the last checkpoint seen, per log.
	StateDir string
	Client   *http.Client
	Out      io.Writer
}

// Exit codes of `sealbox audit`.
const (
	auditInconsistent = 1
	auditUsage        = 2
)

// exitError carries the process exit code of a failed command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }
func (e *exitError) ExitCode() int { return e.code }

// inconsistent is an audit's finding that the log is not what it must be.
func inconsistent(format string, args ...any) error {
	return &exitError{auditInconsistent, fmt.Errorf("INCONSISTENT: "+format, args...)}
}

// unusable is a usage or network error: nothing was found wrong.
func unusable(format string, args ...any) error {
	return &exitError{auditUsage, fmt.Errorf(format, args...)}
}

func newAuditCmd() *cobra.Command {
	a := &Audit{}
	var watch time.Duration
	cmd := &cobra.Command{
		Use:   "audit --server URL --log-key VKEY [--witness VKEY]...",
		Short: "Check a sealbox server's transparency log against the witnesses you trust (exit 0 consistent, 1 inconsistent, 2 usage or network error)",
		Long: `audit checks, from anywhere and without a data directory, that the server's
transparency log is signed by the log key you trust, cosigned by enough of the
witnesses you trust, and consistent with every checkpoint this machine saw
before: the log only grows and never shows two histories. With --account it
lists every directory record of that account in the log, so its owner sees
every key ever published for them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := bindEnv(cmd); err != nil {
				return &exitError{auditUsage, err}
			}
			if err := a.settle(cmd.Flags().Changed("quorum")); err != nil {
				return err
			}
			a.Out = cmd.OutOrStdout()
			if watch <= 0 {
				return a.Run(cmd.Context())
			}
			return a.Watch(cmd.Context(), watch, cmd.ErrOrStderr())
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{auditUsage, err} })
	f := cmd.Flags()
	f.StringVar(&a.Server, "server", "", "the sealbox server's base URL")
	f.StringVar(&a.LogKey, "log-key", "", "the log's note verifier key, as the server's operator published it (GET /v1/transparency/key)")
	f.StringArrayVar(&a.Witnesses, "witness", nil, "the cosignature verifier key of a witness you trust (repeatable)")
	f.IntVar(&a.Quorum, "quorum", 0, "witnesses that must have cosigned the checkpoint (default: every --witness)")
	f.StringVar(&a.Account, "account", "", "list the directory records of this account (its user id)")
	f.DurationVar(&watch, "watch", 0, "audit again at this interval until stopped")
	return cmd
}

// settle checks the flags and fills the defaults: the quorum is every
// witness unless quorumSet, the state under the XDG state directory.
func (a *Audit) settle(quorumSet bool) error {
	if a.Server == "" || a.LogKey == "" {
		return unusable("--server and --log-key are required")
	}
	if _, err := note.NewVerifier(a.LogKey); err != nil {
		return unusable("--log-key %q: %v", a.LogKey, err)
	}
	for _, w := range a.Witnesses {
		if _, err := torchwood.NewCosignatureVerifier(w); err != nil {
			return unusable("--witness %q is not a cosignature verifier key: %v", w, err)
		}
	}
	if !quorumSet {
		a.Quorum = len(a.Witnesses)
	}
	if a.Quorum < 0 || a.Quorum > len(a.Witnesses) {
		return unusable("--quorum %d: must be between 0 and the %d witnesses given", a.Quorum, len(a.Witnesses))
	}
	if a.StateDir == "" {
		dir, err := auditStateDir()
		if err != nil {
			return unusable("%v", err)
		}
		a.StateDir = dir
	}
	if a.Client == nil {
		a.Client = &http.Client{Timeout: 30 * time.Second}
	}
	a.Server = strings.TrimSuffix(a.Server, "/")
	return nil
}

// auditStateDir is $XDG_STATE_HOME/sealbox/audit, or
// ~/.local/state/sealbox/audit.
func auditStateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "sealbox", "audit"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no place for the audit's state: set XDG_STATE_HOME or HOME (%v)", err)
	}
	return filepath.Join(home, ".local", "state", "sealbox", "audit"), nil
}

// Watch audits every interval until ctx ends. An inconsistency ends it; a
// network error is reported and the next round tries again.
func (a *Audit) Watch(ctx context.Context, every time.Duration, errOut io.Writer) error {
	for {
		err := a.Run(ctx)
		var coded *exitError
		if err != nil && (!errors.As(err, &coded) || coded.code != auditUsage) {
			return err
		}
		if err != nil {
			fmt.Fprintln(errOut, "sealbox audit:", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

// Run audits the log once.
func (a *Audit) Run(ctx context.Context) error {
	logVerifier, _ := note.NewVerifier(a.LogKey)
	served, err := a.fetch(ctx, "/v1/transparency/key")
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(served)) != a.LogKey {
		return inconsistent("the server now names another log key than the one you trust (%s): it serves %q", a.LogKey, strings.TrimSpace(string(served)))
	}
	raw, err := a.fetch(ctx, "/v1/transparency/checkpoint")
	if err != nil {
		return err
	}
	tree, err := a.verifyCheckpoint(raw, logVerifier)
	if err != nil {
		return err
	}
	tiles := tlog.TileHashReader(tree, &httpTiles{ctx: ctx, a: a})
	if err := a.checkAgainstLast(tree, raw, logVerifier, tiles); err != nil {
		return err
	}
	if a.Account != "" {
		if err := a.listAccount(ctx, tree, tiles); err != nil {
			return err
		}
	}
	return nil
}

// verifyCheckpoint checks the log's signature and origin and the witness
// quorum, and returns the tree the checkpoint names.
func (a *Audit) verifyCheckpoint(raw []byte, logVerifier note.Verifier) (tlog.Tree, error) {
	n, err := note.Open(raw, note.VerifierList(logVerifier))
	if err != nil {
		return tlog.Tree{}, inconsistent("the checkpoint the server sent is not signed by the log key you trust (%v)", err)
	}
	cp, err := torchwood.ParseCheckpoint(n.Text)
	if err != nil || cp.Origin != logVerifier.Name() {
		return tlog.Tree{}, inconsistent("the checkpoint the server signed is not one of the log %s: %q", logVerifier.Name(), n.Text)
	}
	verifiers := []note.Verifier{logVerifier}
	for _, w := range a.Witnesses {
		v, _ := torchwood.NewCosignatureVerifier(w)
		verifiers = append(verifiers, v)
	}
	n, err = note.Open(raw, note.VerifierList(verifiers...))
	if err != nil {
		return tlog.Tree{}, inconsistent("a witness cosignature on the checkpoint does not verify (%v)", err)
	}
	cosigned := map[string]bool{}
	for _, sig := range n.Sigs {
		if sig.Name != logVerifier.Name() || sig.Hash != logVerifier.KeyHash() {
			cosigned[sig.Name] = true
		}
	}
	if len(cosigned) < a.Quorum {
		return tlog.Tree{}, inconsistent("the checkpoint of %d records is cosigned by %d of the witnesses you trust, not the %d you require: a checkpoint the witnesses did not see may be one shown to you alone", cp.N, len(cosigned), a.Quorum)
	}
	return tlog.Tree{N: cp.N, Hash: cp.Hash}, nil
}

// stateFile is where the last checkpoint of the log is kept: one file per
// log key (which names the origin), whatever URL it is read from.
func (a *Audit) stateFile() string {
	sum := sha256.Sum256([]byte(a.LogKey))
	return filepath.Join(a.StateDir, hex.EncodeToString(sum[:16])+".checkpoint")
}

// checkAgainstLast proves that tree extends the last checkpoint this
// machine saw of the log, then keeps raw as the last one.
func (a *Audit) checkAgainstLast(tree tlog.Tree, raw []byte, logVerifier note.Verifier, tiles tlog.HashReader) error {
	kept, err := os.ReadFile(a.stateFile())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		fmt.Fprintf(a.Out, "first audit of %s on this machine: trusting what the server shows now (%d records); later audits prove the log only grows from here\n", logVerifier.Name(), tree.N)
	case err != nil:
		return unusable("read the last checkpoint seen: %v", err)
	default:
		n, err := note.Open(kept, note.VerifierList(logVerifier))
		if err != nil {
			return unusable("%s is damaged (%v): remove it to start over", a.stateFile(), err)
		}
		last, err := torchwood.ParseCheckpoint(n.Text)
		if err != nil {
			return unusable("%s is damaged (%v): remove it to start over", a.stateFile(), err)
		}
		if err := proveExtends(tree, tlog.Tree{N: last.N, Hash: last.Hash}, tiles); err != nil {
			return err
		}
		fmt.Fprintf(a.Out, "consistent: %s grew from %d to %d records and still holds every record of the last checkpoint seen\n", logVerifier.Name(), last.N, tree.N)
	}
	if err := os.MkdirAll(a.StateDir, 0o700); err != nil {
		return unusable("keep the checkpoint: %v", err)
	}
	tmp := a.stateFile() + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return unusable("keep the checkpoint: %v", err)
	}
	if err := os.Rename(tmp, a.stateFile()); err != nil {
		return unusable("keep the checkpoint: %v", err)
	}
	return nil
}

// proveExtends proves that tree holds every record of last.
func proveExtends(tree, last tlog.Tree, tiles tlog.HashReader) error {
	if tree.N < last.N {
		return inconsistent("the log went backwards: the server shows %d records, but this machine saw a checkpoint of %d; records were removed, or you are shown another history", tree.N, last.N)
	}
	if tree.N == last.N {
		if tree.Hash != last.Hash {
			return inconsistent("the server shows two different logs of %d records: the one seen before and the one now; this is a split view", tree.N)
		}
		return nil
	}
	if last.N == 0 {
		return nil
	}
	proof, err := tlog.ProveTree(tree.N, last.N, tiles)
	if err != nil {
		return tileError(err)
	}
	if err := tlog.CheckTree(proof, tree.N, tree.Hash, last.N, last.Hash); err != nil {
		return inconsistent("the log of %d records does not extend the %d seen before: records were changed or removed, or you are shown another history", tree.N, last.N)
	}
	return nil
}

// tileError is a failure to read the tree from tiles: the network's (exit
// 2) or tiles that do not hash to the signed checkpoint (an inconsistency).
func tileError(err error) error {
	var coded *exitError
	if errors.As(err, &coded) {
		return err
	}
	return inconsistent("a tile the server sent does not match its signed checkpoint (%v): the server's data is not the log it signed", err)
}

// httpTiles reads tiles from the server for x/mod's tlog, which verifies
// every hash against the signed tree.
type httpTiles struct {
	ctx context.Context
	a   *Audit
}

func (h *httpTiles) Height() int { return 8 }

func (h *httpTiles) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		data, err := h.a.fetch(h.ctx, "/v1/transparency/tile/"+tileURLPath(t))
		if err != nil {
			return nil, err
		}
		out[i] = data
	}
	return out, nil
}

func (h *httpTiles) SaveTiles([]tlog.Tile, [][]byte) {}

// tileURLPath spells a tile the C2SP tlog-tiles way: no height, "entries"
// for x/mod's "data".
func tileURLPath(t tlog.Tile) string {
	p := strings.TrimPrefix(t.Path(), "tile/8/")
	if rest, ok := strings.CutPrefix(p, "data/"); ok {
		return "entries/" + rest
	}
	return p
}

// fetch GETs path on the server; anything but a 200 is a network error.
func (a *Audit) fetch(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.Server+path, nil)
	if err != nil {
		return nil, unusable("%v", err)
	}
	resp, err := a.Client.Do(req)
	if err != nil {
		return nil, unusable("%v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, unusable("GET %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, unusable("GET %s: %s", path, resp.Status)
	}
	return body, nil
}

// listAccount prints every directory record of the account in the tree:
// each entry bundle is read and each record proven to be the one the log
// signed (its leaf hash against the verified hash tiles).
func (a *Audit) listAccount(ctx context.Context, tree tlog.Tree, tiles tlog.HashReader) error {
	found := 0
	for start := int64(0); start < tree.N; start += 256 {
		width := min(256, tree.N-start)
		bundle, err := (&httpTiles{ctx: ctx, a: a}).ReadTiles([]tlog.Tile{{H: 8, L: -1, N: start / 256, W: int(width)}})
		if err != nil {
			return err
		}
		indexes := make([]int64, width)
		for i := range indexes {
			indexes[i] = tlog.StoredHashIndex(0, start+int64(i))
		}
		hashes, err := tiles.ReadHashes(indexes)
		if err != nil {
			return tileError(err)
		}
		data := bundle[0]
		for i := int64(0); i < width; i++ {
			var rec []byte
			if rec, data, err = torchwood.ReadTileEntry(data); err != nil || tlog.RecordHash(rec) != hashes[i] {
				return inconsistent("record %d in the entry bundle the server sent is not the record the log signed", start+i)
			}
			r, err := parseLogRecord(rec)
			switch {
			case errors.Is(err, errUnknownRecord):
				fmt.Fprintf(a.Out, "record %d: %v (%q), skipped\n", start+i, err, r.Kind)
			case err != nil:
				return inconsistent("record %d, which the log signed, is malformed: %v", start+i, err)
			case r.Kind == kindDirectory && r.UserID == a.Account:
				found++
				fmt.Fprintf(a.Out, "index %d  version %d  directory %s  key %s\n", start+i, r.Version, r.DirectoryHash, r.KeyHash)
			case r.Kind == kindDirectoryReset && r.UserID == a.Account:
				found++
				fmt.Fprintf(a.Out, "index %d  reset by the operator: version %d cleared, key %s unpinned\n", start+i, r.Version, r.KeyHash)
			case r.Kind == kindAccountDeleted && r.UserID == a.Account:
				found++
				fmt.Fprintf(a.Out, "index %d  account deleted: version %d cleared, key %s unpinned\n", start+i, r.Version, r.KeyHash)
			}
		}
		if len(data) != 0 {
			return inconsistent("the entry bundle at record %d holds more records than the log signed", start)
		}
	}
	fmt.Fprintf(a.Out, "%d directory records of account %s in %d records of the log\n", found, a.Account, tree.N)
	return nil
}
