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
	"syscall"
	"time"

	"sealbox/kv/durable"

	"filippo.io/torchwood"
	"github.com/spf13/cobra"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"sealbox/cli/client"
	"sealbox/server"
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
	// Wait, when set, is how long to wait for the records the log holds
	// beyond the checkpoint it serves to be in a signed checkpoint.
	Wait time.Duration
	// Now and After are the clock --wait reads and waits on (tests make
	// it run at once); default time.Now and time.After.
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
	// StateDir keeps the last checkpoint seen, per log.
	StateDir string
	Out      io.Writer

	// api reads the log from Server, each request once: a failed audit
	// is run again by the next --watch round or cron job.
	api *client.Client
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
every key ever published for them.

The server signs a checkpoint in the background, at most once per its
--checkpoint-interval (5 s by default): a record published a moment ago is in
the log but not yet in a signed checkpoint. audit says so, and with --wait it
waits for a checkpoint that holds it.`,
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
	f.StringVar(&a.Account, "account", "", "list the directory records of this account: its user id (a UUID, the user_id of GET /v1/auth/profile), not its email")
	f.DurationVar(&a.Wait, "wait", 0, "wait for records published a moment ago to be in a signed checkpoint, up to a minute (--wait) or as long as given (--wait=5m)")
	f.Lookup("wait").NoOptDefVal = "1m"
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
	// The log names an account by its user id alone, never by email: an
	// email would match nothing and read as "no key was ever published".
	if a.Account != "" && !isUserID(a.Account) {
		return unusable("--account takes the account's user id (a UUID such as 6f1c2a3b-…), not %q: the log never names an email. "+
			"Its owner finds it as user_id in GET /v1/auth/profile (their client's account page); the server's operator in the USER ID column of `sealbox users list`", a.Account)
	}
	if a.StateDir == "" {
		dir, err := auditStateDir()
		if err != nil {
			return unusable("%v", err)
		}
		a.StateDir = dir
	}
	api, err := client.New(a.Server, &http.Client{Timeout: 30 * time.Second})
	if err != nil {
		return unusable("--server: %v", err)
	}
	api.UserAgent = "sealbox-audit/" + server.Version
	api.Retry.Attempts = 1
	a.api = api
	if a.Now == nil {
		a.Now = time.Now
	}
	if a.After == nil {
		a.After = time.After
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

// isUserID reports whether s is a user id: a UUID in canonical lowercase.
func isUserID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
	}
	return true
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

// checkServedKey checks that the server still names the log key trusted.
func (a *Audit) checkServedKey(ctx context.Context) error {
	served, err := a.fetch("/v1/transparency/key", func() ([]byte, error) { return a.api.TransparencyKey(ctx) })
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(served)) != a.LogKey {
		return inconsistent("the server now names another log key than the one you trust (%s): it serves %q", a.LogKey, strings.TrimSpace(string(served)))
	}
	return nil
}

// Run audits the log once.
func (a *Audit) Run(ctx context.Context) error {
	logVerifier, _ := note.NewVerifier(a.LogKey)
	if err := a.checkServedKey(ctx); err != nil {
		return err
	}
	raw, tree, err := a.signedCheckpoint(ctx, logVerifier)
	if err != nil {
		return err
	}
	size, err := a.logSize(ctx, tree.N)
	if err != nil {
		return err
	}
	if a.Wait > 0 && size > tree.N {
		if raw, tree, err = a.waitSigned(ctx, logVerifier, size, tree.N); err != nil {
			return err
		}
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
	return a.reportUnsigned(ctx, tree.N, size)
}

// ProveRecord proves that record is the log's record at index, as a client
// does before it uses a directory (server/PROTOCOL.md §16): the checkpoint
// is verified as Run verifies one (the log key, the witnesses' quorum) and
// proven to extend the last one kept, which it then replaces; with Wait, a
// record beyond the served checkpoint is waited for. A record that is not
// the log's at index, a log that went backwards or shows another history
// are inconsistencies (exit status 1 in an *exitError).
func (a *Audit) ProveRecord(ctx context.Context, index int64, record []byte) error {
	logVerifier, err := note.NewVerifier(a.LogKey)
	if err != nil {
		return unusable("the log key kept, %q: %v", a.LogKey, err)
	}
	if err := a.checkServedKey(ctx); err != nil {
		return err
	}
	raw, tree, err := a.signedCheckpoint(ctx, logVerifier)
	if err != nil {
		return err
	}
	if index >= tree.N && a.Wait > 0 {
		if raw, tree, err = a.waitSigned(ctx, logVerifier, index+1, tree.N); err != nil {
			return err
		}
	}
	if index >= tree.N {
		return unusable("the record at index %d is not yet in a signed checkpoint (of %s): %s", index, count(tree.N, "record"), unsignedAdvice)
	}
	tiles := tlog.TileHashReader(tree, &httpTiles{ctx: ctx, a: a})
	if err := a.checkAgainstLast(tree, raw, logVerifier, tiles); err != nil {
		return err
	}
	proof, err := tlog.ProveRecord(tree.N, index, tiles)
	if err != nil {
		return tileError(err)
	}
	if err := tlog.CheckRecord(proof, tree.N, tree.Hash, index, tlog.RecordHash(record)); err != nil {
		return inconsistent("the log's record at index %d is not %q: what the server showed is not in its log", index, strings.TrimSpace(string(record)))
	}
	return nil
}

// signedCheckpoint fetches the checkpoint the server serves and verifies it.
func (a *Audit) signedCheckpoint(ctx context.Context, logVerifier note.Verifier) ([]byte, tlog.Tree, error) {
	raw, err := a.fetch("/v1/transparency/checkpoint", func() ([]byte, error) { return a.api.Checkpoint(ctx) })
	if err != nil {
		return nil, tlog.Tree{}, err
	}
	tree, err := a.verifyCheckpoint(raw, logVerifier)
	return raw, tree, err
}

// auditPoll is how often --wait asks for a newer checkpoint.
const auditPoll = time.Second

// unsignedAdvice says why records are in the log but in no checkpoint yet.
const unsignedAdvice = "the server signs every 5 s (its --checkpoint-interval, unless its operator changed it), and with witnesses serves a checkpoint once its quorum cosigned it"

// waitSigned waits, up to a.Wait, for a signed checkpoint of at least size
// records, and returns it.
func (a *Audit) waitSigned(ctx context.Context, logVerifier note.Verifier, size, signed int64) ([]byte, tlog.Tree, error) {
	fmt.Fprintf(a.Out, "the log holds %s, the signed checkpoint %d: waiting up to %s for a signed checkpoint that holds them all\n", count(size, "record"), signed, a.Wait)
	deadline := a.Now().Add(a.Wait)
	for {
		select {
		case <-ctx.Done():
			return nil, tlog.Tree{}, unusable("%v", ctx.Err())
		case <-a.After(auditPoll):
		}
		raw, tree, err := a.signedCheckpoint(ctx, logVerifier)
		if err != nil || tree.N >= size {
			return raw, tree, err
		}
		if a.Now().After(deadline) {
			return nil, tlog.Tree{}, unusable("after waiting %s, the signed checkpoint still holds %d of the log's %d records: %s", a.Wait, tree.N, size, unsignedAdvice)
		}
	}
}

// logSize returns how many records the log holds, from signed (the size of
// the verified checkpoint) on: entry bundles are served up to the log's
// size, signed or not, so it probes them, a binary search of the widths of
// each tile.
func (a *Audit) logSize(ctx context.Context, signed int64) (int64, error) {
	n := signed
	for {
		tile, have := n/256, int(n%256)
		ok, err := a.bundleExists(ctx, tile, have+1)
		if err != nil || !ok {
			return n, err
		}
		lo, hi := have+1, 256
		for lo < hi {
			mid := (lo + hi + 1) / 2
			ok, err := a.bundleExists(ctx, tile, mid)
			if err != nil {
				return 0, err
			}
			if ok {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		n = tile*256 + int64(lo)
		if lo < 256 {
			return n, nil
		}
	}
}

// bundleExists reports whether the server serves the entry bundle of tile
// n with width records (a 404 is a log too small for it).
func (a *Audit) bundleExists(ctx context.Context, n int64, width int) (bool, error) {
	path := tileURLPath(tlog.Tile{H: 8, L: -1, N: n, W: width})
	_, err := a.api.TransparencyTile(ctx, path)
	var refused *client.Error
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &refused) && refused.Status == http.StatusNotFound:
		return false, nil
	}
	return false, unusable("GET an entry bundle: %v", err)
}

// reportUnsigned says that the records from signed to size are in the log
// but in no signed checkpoint yet, and lists the account's among them:
// right after a publish, "0 records" would falsely reassure.
func (a *Audit) reportUnsigned(ctx context.Context, signed, size int64) error {
	if size <= signed {
		return nil
	}
	mine := 0
	if a.Account != "" {
		recs, err := a.unsignedRecords(ctx, signed, size)
		if err != nil {
			return err
		}
		for i, rec := range recs {
			r, err := parseLogRecord(rec)
			if err == nil && a.printRecord(signed+int64(i), r, "  (not yet in a signed checkpoint)") {
				mine++
			}
		}
	}
	fmt.Fprintf(a.Out, "%s more in the log, not yet in a signed checkpoint", count(size-signed, "record"))
	if a.Account != "" {
		fmt.Fprintf(a.Out, " (%d of them this account's)", mine)
	}
	fmt.Fprintf(a.Out, ": %s; run again in a few seconds, or with --wait\n", unsignedAdvice)
	return nil
}

// unsignedRecords reads the records from signed to size. No signed tree
// proves them yet: they are shown as the server's word, never as proven.
func (a *Audit) unsignedRecords(ctx context.Context, signed, size int64) ([][]byte, error) {
	var out [][]byte
	for start := signed - signed%256; start < size; start += 256 {
		width := int(min(256, size-start))
		bundle, err := (&httpTiles{ctx: ctx, a: a}).ReadTiles([]tlog.Tile{{H: 8, L: -1, N: start / 256, W: width}})
		if err != nil {
			return nil, err
		}
		data := bundle[0]
		for i := start; i < start+int64(width); i++ {
			var rec []byte
			if rec, data, err = torchwood.ReadTileEntry(data); err != nil {
				return nil, unusable("the entry bundle at record %d is malformed: %v", start, err)
			}
			if i >= signed {
				out = append(out, rec)
			}
		}
	}
	return out, nil
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
		fmt.Fprintf(a.Out, "first audit of %s on this machine: trusting what the server shows now (%s); later audits prove the log only grows from here\n", logVerifier.Name(), count(tree.N, "record"))
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
		fmt.Fprintf(a.Out, "consistent: %s grew from %d to %s and still holds every record of the last checkpoint seen\n", logVerifier.Name(), last.N, count(tree.N, "record"))
	}
	if err := a.keep(raw); err != nil {
		return unusable("keep the checkpoint: %v", err)
	}
	return nil
}

// keep writes raw as the last checkpoint seen, in a directory only its
// owner may enter (an existing one is made so, or refused when it cannot
// be), through a temporary file created afresh and renamed over the state
// file: what another user could plant at the temporary name never
// redirects the write.
func (a *Audit) keep(raw []byte) error {
	if err := os.MkdirAll(a.StateDir, 0o700); err != nil {
		return err
	}
	fi, err := os.Lstat(a.StateDir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory but a %v: the audit keeps its state only in a directory of its own", a.StateDir, fi.Mode().Type())
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(a.StateDir, 0o700); err != nil {
			return fmt.Errorf("%s has mode %v and cannot be made private to you (0700): %v", a.StateDir, fi.Mode().Perm(), err)
		}
	}
	tmp := a.stateFile() + ".tmp"
	// What an interrupted run left at the name, or a link, is removed (a
	// link itself, never what it names); O_EXCL and O_NOFOLLOW then create
	// the file and fail rather than follow a link made in between.
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(raw)
	err = durable.Close(f, err)
	if err == nil {
		err = os.Rename(tmp, a.stateFile())
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// printRecord prints the record at index, followed by note, when it is one
// of the account's directory records, and reports whether it was.
func (a *Audit) printRecord(index int64, r logRecord, note string) bool {
	switch {
	case r.UserID != a.Account:
		return false
	case r.Kind == kindDirectory:
		fmt.Fprintf(a.Out, "index %d  version %d  directory %s  key %s%s\n", index, r.Version, r.DirectoryHash, r.KeyHash, note)
	case r.Kind == kindDirectoryReset:
		fmt.Fprintf(a.Out, "index %d  reset by the operator: version %d cleared, key %s unpinned%s\n", index, r.Version, r.KeyHash, note)
	case r.Kind == kindAccountDeleted:
		fmt.Fprintf(a.Out, "index %d  account deleted: version %d cleared, key %s unpinned%s\n", index, r.Version, r.KeyHash, note)
	default:
		return false
	}
	return true
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
		path := tileURLPath(t)
		data, err := h.a.fetch("/v1/transparency/tile/"+path, func() ([]byte, error) { return h.a.api.TransparencyTile(h.ctx, path) })
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

// fetch reads what read reads from the server (path names it): a refusal
// or no answer is an error of the audit's use, exit 2, never an
// inconsistency of the log.
func (a *Audit) fetch(path string, read func() ([]byte, error)) ([]byte, error) {
	body, err := read()
	if err != nil {
		return nil, unusable("GET %s: %v", path, err)
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
			case a.printRecord(start+i, r, ""):
				found++
			}
		}
		if len(data) != 0 {
			return inconsistent("the entry bundle at record %d holds more records than the log signed", start)
		}
	}
	fmt.Fprintf(a.Out, "%s of account %s in %s of the log\n", count(found, "directory record"), a.Account, count(tree.N, "record"))
	return nil
}
