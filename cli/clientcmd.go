package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"filippo.io/torchwood"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"sealbox/cli/client"
	"sealbox/cli/library"
	"sealbox/cli/sealed"
	"sealbox/server"
)

// The `sealbox client` commands are the person's side: sign up or in, sync
// a photo folder, export it back, share. They talk to a server over HTTP
// like any other client (cli/client), seal with cli/sealed, and keep their
// state in a profile (cli/library). Exit status: 0 all done, 1 some files
// failed (listed), 2 usage, credentials or a refusal of the server.

// clientError is a client command's failure with its exit status.
type clientError struct {
	code int
	err  error
}

func (e *clientError) Error() string { return e.err.Error() }
func (e *clientError) Unwrap() error { return e.err }
func (e *clientError) ExitCode() int { return e.code }

// refused is a failure of usage, credentials or the server: exit 2.
func refused(err error) error {
	if err == nil {
		return nil
	}
	return &clientError{code: 2, err: err}
}

// clientArgs is an argument check whose failure exits 2, as a usage error.
func clientArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error { return refused(check(cmd, args)) }
}

// clientFlags are what every client command takes.
type clientFlags struct {
	profile string
	json    bool
	retries int
}

func (f *clientFlags) add(cmd *cobra.Command) {
	cmd.PersistentFlags().IntVar(&f.retries, "retries", client.DefaultRetry.Attempts, "tries of a request the server did not answer (or answered busy), with backoff, before the command gives up")
	cmd.PersistentFlags().StringVar(&f.profile, "profile", "", "keep this client's session, keys and index in DIR (default $XDG_CONFIG_HOME/sealbox and $XDG_STATE_HOME/sealbox)")
	cmd.PersistentFlags().BoolVar(&f.json, "json", false, "write one JSON object per line instead of text")
}

func newClientCmd() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   "client",
		Short: "Put photos in a sealbox server and get them back: sign up, sync a folder, export, share",
		Long: `The sealbox client seals every photo and video on this device before it leaves it:
the server stores and serves ciphertext, and the keys stay with you (and in an escrow only
your password or your recovery key opens).`,
		GroupID: groupUsing,
	}
	f.add(cmd)
	cmd.AddCommand(newClientSignupCmd(&f), newClientLoginCmd(&f), newClientLogoutCmd(&f), newClientStatusCmd(&f),
		newClientSyncCmd(&f), newClientAlbumsCmd(&f), newClientLsCmd(&f), newClientExportCmd(&f),
		newClientShareCmd(&f), newClientSharesCmd(&f), newClientUnshareCmd(&f), newClientPasswdCmd(&f), newClientRecoverCmd(&f),
		newClientLinkCmd(&f), newClientDevicesCmd(&f), newClientSignOutEverywhereCmd(&f), newClientEscrowCmd(&f))
	return cmd
}

// account is what a signed-in client command works with.
type account struct {
	profile *library.Profile
	client  *client.Client
	session *library.Session
	keys    *library.Keys
}

// openAccount opens the profile and its signed-in session, refusing keys
// an unfinished signup made: nothing is to be sealed with them before the
// server holds their escrow.
func openAccount(f *clientFlags) (*account, error) {
	a, err := openSignedIn(f)
	if err == nil && a.keys.SignupUnfinished {
		return nil, refused(library.ErrSignupUnfinished)
	}
	return a, err
}

// openSignedIn is openAccount taking the keys of an unfinished signup too,
// for logout to remove them.
func openSignedIn(f *clientFlags) (*account, error) {
	p, err := library.OpenProfile(f.profile)
	if err != nil {
		return nil, refused(err)
	}
	s, err := p.Session()
	if err != nil {
		return nil, refused(err)
	}
	keys, err := p.Keys()
	if err != nil {
		return nil, refused(err)
	}
	c, err := client.New(s.Server, nil)
	if err != nil {
		return nil, refused(err)
	}
	c.UserAgent = "sealbox-client/" + server.Version
	c.Retry.Attempts = max(1, f.retries)
	library.KeepTokens(p, c, s)
	return &account{profile: p, client: c, session: s, keys: keys}, nil
}

// serverError says what the server's refusal means for the person, exit 2.
func serverError(err error) error {
	if errors.Is(err, client.ErrSignedOut) {
		return refused(fmt.Errorf("%w: run sealbox client login", err))
	}
	return refused(err)
}

// readSecret reads a password or passphrase: the first line of standard
// input with fromStdin, else from the terminal without echo (twice with
// confirm).
func readSecret(cmd *cobra.Command, fromStdin bool, prompt string, confirm bool) (string, error) {
	if fromStdin {
		lines, err := readLines(cmd, 1)
		if err != nil {
			return "", fmt.Errorf("the %s: %w", strings.ToLower(prompt), err)
		}
		return lines[0], nil
	}
	fd := int(os.Stdin.Fd())
	if !term.IsTerminal(fd) {
		return "", fmt.Errorf("standard input is not a terminal: pass --password-stdin to read the %s from it", strings.ToLower(prompt))
	}
	ask := func(p string) (string, error) {
		fmt.Fprint(cmd.ErrOrStderr(), p+": ")
		b, err := term.ReadPassword(fd)
		fmt.Fprintln(cmd.ErrOrStderr())
		return string(b), err
	}
	s, err := ask(prompt)
	if err != nil || !confirm {
		return s, err
	}
	again, err := ask(prompt + " again")
	if err != nil {
		return "", err
	}
	if s != again {
		return "", errors.New("the two differ")
	}
	return s, nil
}

// startSignIn is what signup, login and recover begin with: the account's
// email given, the profile opened, and a client of the server at url.
func startSignIn(f *clientFlags, email, url string) (*library.Profile, *client.Client, error) {
	if email == "" {
		return nil, nil, refused(errors.New("give the account's email with --email"))
	}
	p, err := library.OpenProfile(f.profile)
	if err != nil {
		return nil, nil, refused(err)
	}
	c, err := client.New(url, nil)
	if err != nil {
		return nil, nil, refused(err)
	}
	c.Retry.Attempts = max(1, f.retries)
	return p, c, nil
}

// emit writes v as one JSON line.
func emit(w io.Writer, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintln(w, string(b))
}

func newClientSignupCmd(f *clientFlags) *cobra.Command {
	var email, invite string
	var witnesses []string
	var fromStdin, noPasswordEscrow bool
	cmd := &cobra.Command{
		Use:   "signup URL|INVITATION-LINK",
		Short: "Create an account on the server at URL, with its keys, and sign in on this device",
		Long: `Creates the account and its keys. The password you choose opens your photos' keys: the
server is sent only a secret derived from it, never the password. A recovery key is printed
once: write it down and keep it safe. It is the only way back to your photos if you forget the
password, and nobody, the server's operator included, can recover them without it. The keys
are kept on this device before the server is given anything that needs them: a signup that
fails after the account was made is finished by running it again with the same email and
password.`,
		Args: clientArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			// An invitation link is the server's address with the code
			// in its fragment: URL/#invite=CODE.
			server, fragment, _ := strings.Cut(args[0], "#")
			if code, ok := strings.CutPrefix(fragment, "invite="); ok && invite == "" {
				invite = code
			}
			if err := checkWitnesses(witnesses); err != nil {
				return err
			}
			p, c, err := startSignIn(f, email, server)
			if err != nil {
				return err
			}
			password, err := readSecret(cmd, fromStdin, "Password", true)
			if err != nil {
				return refused(err)
			}
			if len(password) < 8 {
				return refused(errors.New("the password must be at least 8 characters"))
			}
			recovery, err := library.Signup(cmd.Context(), p, c, email, password, invite, noPasswordEscrow)
			if err != nil {
				return serverError(err)
			}
			if err := keepWitnesses(p, c.BaseURL(), witnesses); err != nil {
				return err
			}
			if f.json {
				emit(cmd.OutOrStdout(), map[string]string{"email": email, "server": c.BaseURL(), "recovery_key": recovery.String()})
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Signed up as %s on %s.\n\nYour recovery key (write it down now; it is shown only this once):\n\n    %s\n\n"+
				"Without your password and without this key, nobody can open your photos, the server's operator included.\n",
				email, c.BaseURL(), recovery)
			return nil
		},
	}
	cmd.Flags().StringVar(&email, "email", "", "the account's email")
	addWitnessFlag(cmd, &witnesses)
	cmd.Flags().BoolVar(&noPasswordEscrow, "no-password-escrow", false, "keep the keys' escrow under the recovery key only: nobody holding the server's data can try passwords against it, and a new device gets the keys from a linked device (sealbox client link) or the recovery key")
	cmd.Flags().StringVar(&invite, "invite", "", "the invitation's code, on a server that registers by invitation (an invitation link URL/#invite=CODE carries it too)")
	cmd.Flags().BoolVar(&fromStdin, "password-stdin", false, "read the password from the first line of standard input")
	return cmd
}

func newClientLoginCmd(f *clientFlags) *cobra.Command {
	var email string
	var codes, witnesses []string
	var fromStdin bool
	cmd := &cobra.Command{
		Use:   "login URL",
		Short: "Sign in on this device and open the account's keys with the password, or get them from a linked device",
		Long: `Signs in with the password (and the second factor's code, for an account that has one).
The keys are opened with the password, or, given a link code from sealbox client link on a
signed-in device (--code, the full code or its 12 digits), received from that device: both
devices show a comparison string, and the keys come once the person confirms on the other
device that the two are the same. With --json the string is printed as {"compare"}.`,
		Args: clientArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			code, link, err := splitCodes(codes)
			if err != nil {
				return refused(err)
			}
			if err := checkWitnesses(witnesses); err != nil {
				return err
			}
			p, c, err := startSignIn(f, email, args[0])
			if err != nil {
				return err
			}
			password, err := readSecret(cmd, fromStdin, "Password", false)
			if err != nil {
				return refused(err)
			}
			if link != "" {
				return loginByLink(cmd, f, p, c, email, password, code, link, witnesses)
			}
			if err := library.Login(cmd.Context(), p, c, email, password, code); err != nil {
				if errors.Is(err, library.ErrNoPasswordEscrow) {
					// A session without keys is of no use here.
					_ = c.Logout(cmd.Context())
					_ = p.Forget()
				}
				return serverError(err)
			}
			if err := keepWitnesses(p, c.BaseURL(), witnesses); err != nil {
				return err
			}
			if f.json {
				emit(cmd.OutOrStdout(), map[string]string{"email": email, "server": c.BaseURL()})
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Signed in as %s on %s.\n", email, c.BaseURL())
			return nil
		},
	}
	cmd.Flags().StringVar(&email, "email", "", "the account's email")
	addWitnessFlag(cmd, &witnesses)
	cmd.Flags().StringArrayVar(&codes, "code", nil, "the second factor's current code, for an account that has one; or a link code from sealbox client link (give --code twice for both)")
	cmd.Flags().BoolVar(&fromStdin, "password-stdin", false, "read the password from the first line of standard input")
	return cmd
}

// addWitnessFlag adds --witness, the witnesses this device requires on the
// transparency log's checkpoints.
func addWitnessFlag(cmd *cobra.Command, witnesses *[]string) {
	cmd.Flags().StringArrayVar(witnesses, "witness", nil, "the cosignature verifier key of a witness of the server's transparency log you trust (repeatable): the device then uses the account's directory only in a checkpoint every one of them cosigned")
}

// checkWitnesses refuses a --witness that is not a cosignature verifier
// key, before anything is asked of the server.
func checkWitnesses(witnesses []string) error {
	for _, w := range witnesses {
		if _, err := torchwood.NewCosignatureVerifier(w); err != nil {
			return refused(fmt.Errorf("--witness %q is not a cosignature verifier key: %v", w, err))
		}
	}
	return nil
}

// keepWitnesses keeps the witnesses (checked by checkWitnesses) in the
// profile as those of server's log, once the sign-in to it has succeeded:
// a refused sign-in changes nothing of what the device trusts. With none
// given, the ones kept for server before stay.
func keepWitnesses(p *library.Profile, server string, witnesses []string) error {
	if len(witnesses) == 0 {
		return nil
	}
	trust, err := p.LogTrust(server)
	if err != nil {
		return refused(err)
	}
	trust.Witnesses = witnesses
	return p.SaveLogTrust(trust)
}

// loginByLink signs in and receives the keys from the device that issued
// the link code.
func loginByLink(cmd *cobra.Command, f *clientFlags, p *library.Profile, c *client.Client, email, password, code, link string, witnesses []string) error {
	out := cmd.OutOrStdout()
	show := func(sas string) {
		if f.json {
			emit(out, map[string]string{"compare": sas})
			return
		}
		fmt.Fprintf(out, "Comparison string: %s\nType it on the device that showed the link code; this device waits for the keys...\n", spaced(sas))
	}
	if err := library.LoginByLink(cmd.Context(), p, c, email, password, code, link, show); err != nil {
		return serverError(err)
	}
	if err := keepWitnesses(p, c.BaseURL(), witnesses); err != nil {
		return err
	}
	// The new device lists itself in the account's directory, signed with
	// the identity key it now holds.
	a, err := openAccount(f)
	if err != nil {
		return err
	}
	if err := a.publishDevices(cmd.Context(), a.withDevice); err != nil {
		return refused(fmt.Errorf("signed in, and this device holds the keys, but it could not list itself in the account's device directory: %w", err))
	}
	if f.json {
		emit(out, map[string]any{"email": email, "server": c.BaseURL(), "linked": true})
		return nil
	}
	fmt.Fprintf(out, "Signed in as %s on %s; the keys came from your other device.\n", email, c.BaseURL())
	return nil
}

func newClientLogoutCmd(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "logout",
		Short: "Sign out: end the session on the server and remove this device's session, keys and index",
		Long: `Ends the session on the server and removes from this device everything of the account: the
session, the keys, the index of what was synced (it holds the keys of the albums this device
made, which open their photos, and the links it made with their secrets) and the uploads not
yet finished. After signing in again to the same account, the first sync reads the account's
albums back from the server: what is already there is recognised and not sent again.`,
		Args: clientArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := openSignedIn(f)
			if err != nil {
				return err
			}
			// The server may be gone for good: the keys and the index are
			// removed here whatever it answers.
			serr := a.client.Logout(cmd.Context())
			if err := a.profile.Forget(); err != nil {
				return err
			}
			if serr != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "sealbox: signed out on this device; the server did not confirm the end of the session: %v\n", serr)
			}
			return nil
		},
	}
}

func newClientStatusCmd(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the account this device is signed in to, and check the session",
		Args:  clientArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := openAccount(f)
			if err != nil {
				return err
			}
			_, perr := a.client.Profile(cmd.Context())
			state := "signed in"
			if perr != nil {
				state = "session not usable: " + perr.Error()
			}
			ix, err := a.profile.OpenIndex()
			if err != nil {
				return refused(err)
			}
			st, err := ix.Stats()
			ix.Close()
			if err != nil {
				return err
			}
			if f.json {
				emit(cmd.OutOrStdout(), map[string]any{"server": a.session.Server, "email": a.session.Email,
					"user_id": a.session.UserID, "device_id": a.session.DeviceID, "signed_in": perr == nil,
					"synced_files": st.Files, "pending": st.Pending, "no_thumbnail": st.NoThumbnail})
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "Server:  %s\nAccount: %s (%s)\nDevice:  %s\nSession: %s\nSynced:  %d files from this device, %d not yet all sent\n",
					a.session.Server, a.session.Email, a.session.UserID, a.session.DeviceID, state, st.Files, st.Pending)
				if len(st.NoThumbnail) > 0 {
					fmt.Fprintf(cmd.OutOrStdout(), "Kept without a thumbnail (HEIC, RAW, video or undecodable), %d:\n", len(st.NoThumbnail))
					for _, p := range st.NoThumbnail {
						fmt.Fprintf(cmd.OutOrStdout(), "  %s\n", p)
					}
				}
			}
			return serverErrorOrNil(perr)
		},
	}
}

func serverErrorOrNil(err error) error {
	if err == nil {
		return nil
	}
	return serverError(err)
}

// reporter prints a run's events: one JSON object per line with --json,
// else a line per file that did something.
func reporter(cmd *cobra.Command, asJSON bool) func(library.Event) {
	out := cmd.OutOrStdout()
	return func(ev library.Event) {
		if asJSON {
			emit(out, ev)
			return
		}
		switch ev.What {
		case "unchanged":
		case "failed":
			fmt.Fprintf(cmd.ErrOrStderr(), "failed    %s: %s\n", ev.Path, ev.Error)
		case "skipped":
			fmt.Fprintf(out, "skipped   %s: %s\n", ev.Path, ev.Error)
		default:
			fmt.Fprintf(out, "%-9s %s\n", ev.What, ev.Path)
		}
	}
}

// finish is a run's last line and its exit status: 1 when files failed. A
// sync's (updates) counts the assets whose metadata it sent again; an
// export has none.
func finish(cmd *cobra.Command, asJSON bool, verb string, updates bool, sum library.Summary, started time.Time) error {
	if asJSON {
		done := map[string]any{"event": "done", "done": sum.Done, "unchanged": sum.Unchanged,
			"known": sum.Known, "failed": sum.Failed, "skipped": sum.Skipped, "bytes": sum.Bytes, "seconds": time.Since(started).Seconds()}
		if updates {
			done["updated"] = sum.Updated
		}
		emit(cmd.OutOrStdout(), done)
	} else {
		updated := ""
		if updates {
			updated = fmt.Sprintf(" %d updated,", sum.Updated)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s %d (%s),%s %d unchanged, %d already there, %d failed, %d skipped, in %s\n", verb, sum.Done,
			FormatSize(sum.Bytes), updated, sum.Unchanged, sum.Known, sum.Failed, sum.Skipped, time.Since(started).Round(time.Millisecond))
	}
	if sum.Failed > 0 {
		return &clientError{code: 1, err: fmt.Errorf("%d files failed: %s", sum.Failed, strings.Join(sum.FailedPaths, ", "))}
	}
	return nil
}

func newClientSyncCmd(f *clientFlags) *cobra.Command {
	s := library.Syncer{Jobs: 4, TusOver: 64 << 20}
	var watch bool
	var settle, rescan time.Duration
	var rate int64
	cmd := &cobra.Command{
		Use:   "sync FOLDER...",
		Short: "Seal and upload the photos and videos of folders (a backup: files deleted here stay on the server)",
		Long: `Seals every photo and video below the folders and uploads what the server does not have.
A backup, not a mirror: a file deleted here stays on the server. A second run reads no file that
did not change, and a moved or renamed file is recognised and not sent again. Large files go
through resumable uploads that a later run resumes.`,
		Args: clientArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if s.Album != "" && s.AlbumPerFolder {
				return refused(errors.New("give --album or --album-per-folder, not both"))
			}
			a, err := openAccount(f)
			if err != nil {
				return err
			}
			ix, err := a.profile.OpenIndex()
			if err != nil {
				return refused(err)
			}
			defer ix.Close()
			s.Client, s.Profile, s.Index, s.Session, s.Keys = a.client, a.profile, ix, a.session, a.keys
			a.client.SetUploadRate(rate)
			s.Report, s.ClientVersion, s.Now, s.Settle = reporter(cmd, f.json), "sealbox/"+server.Version, time.Now, settle
			if bar := newSyncBar(cmd, f.json); bar != nil {
				s.Plan, s.Report = bar.plan, bar.report(s.Report)
				defer bar.finish()
			}
			if watch {
				if s.DryRun {
					return refused(errors.New("--watch syncs as things change: it takes no --dry-run"))
				}
				started := time.Now()
				return s.Watch(cmd.Context(), args, settle, rescan, func(sum library.Summary, err error) {
					if err != nil {
						fmt.Fprintf(cmd.ErrOrStderr(), "sealbox: %v; trying again at the next change\n", err)
						return
					}
					if ferr := finish(cmd, f.json, "uploaded", true, sum, started); ferr != nil {
						fmt.Fprintf(cmd.ErrOrStderr(), "sealbox: %v; trying again at the next change\n", ferr)
					}
					started = time.Now()
				})
			}
			started := time.Now()
			sum, err := s.Sync(cmd.Context(), args)
			if err != nil {
				return serverError(err)
			}
			return finish(cmd, f.json, "uploaded", true, sum, started)
		},
	}
	cmd.Flags().StringVar(&s.Album, "album", "", "file every photo in the album of this title (default: an album named after each folder given)")
	cmd.Flags().BoolVar(&s.AlbumPerFolder, "album-per-folder", false, "file each folder's photos in an album named after the folder")
	cmd.Flags().IntVar(&s.Jobs, "jobs", s.Jobs, "files sealed and uploaded at once")
	cmd.Flags().BoolVar(&s.DryRun, "dry-run", false, "say what would be uploaded, and upload nothing")
	cmd.Flags().Var(sizeFlag{&rate}, "limit-rate", "send at most this many bytes a second, all uploads together (e.g. 2MiB; default no limit)")
	cmd.Flags().BoolVar(&watch, "watch", false, "keep running, and sync what changes in the folders (until interrupted)")
	cmd.Flags().DurationVar(&settle, "settle", 2*time.Second, "how long a file that changed while it was read must stay unchanged before it is read again; with --watch, the same for the folders before a change is synced")
	cmd.Flags().DurationVar(&rescan, "rescan", time.Minute, "with --watch: how often the folders are synced whole anyway (a folder unmounted and mounted again is seen by then)")
	return cmd
}

// catalog opens the account's albums and assets.
func (a *account) catalog() *library.Catalog {
	return &library.Catalog{Client: a.client, Keys: a.keys}
}

func newClientAlbumsCmd(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "albums",
		Short: "List the account's albums with their photo counts",
		Args:  clientArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := openAccount(f)
			if err != nil {
				return err
			}
			return listAlbums(cmd.Context(), cmd, a, f.json, "")
		},
	}
}

func newClientLsCmd(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "ls ALBUM",
		Short: "List an album's photos and videos",
		Args:  clientArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := openAccount(f)
			if err != nil {
				return err
			}
			return listAlbums(cmd.Context(), cmd, a, f.json, args[0])
		},
	}
}

// listAlbums lists the albums (title ""), or the assets of the album of
// that title.
func listAlbums(ctx context.Context, cmd *cobra.Command, a *account, asJSON bool, title string) error {
	cat := a.catalog()
	ids, err := cat.Albums(ctx)
	if err != nil {
		return serverError(err)
	}
	found := false
	for _, id := range ids {
		assets, failed, err := cat.Assets(ctx, id)
		if err != nil {
			return serverError(err)
		}
		name := id
		if len(assets) > 0 {
			name = assets[0].AlbumTitle
		}
		if title == "" {
			if asJSON {
				emit(cmd.OutOrStdout(), map[string]any{"album": name, "album_id": id, "assets": len(assets), "unreadable": len(failed)})
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "%-30s %6d\n", name, len(assets))
			}
			continue
		}
		if name != title {
			continue
		}
		found = true
		for _, as := range assets {
			taken := ""
			if as.Meta.Taken != nil {
				taken = as.Meta.Taken.Local
			}
			// An asset of two originals is one line: its still, then its
			// video or raw file after a "+".
			name, size := as.Meta.Name, as.Meta.Size
			companion := ""
			if c := as.Meta.Companion; c != nil {
				companion, size = c.Name, size+c.Size
				name += " + " + c.Name
			}
			if asJSON {
				sidecars := []string{}
				for _, sc := range as.Meta.Sidecars {
					sidecars = append(sidecars, sc.Name)
				}
				emit(cmd.OutOrStdout(), map[string]any{"name": as.Meta.Name, "asset_id": as.Entry.AssetID, "size": as.Meta.Size,
					"media_type": as.Meta.MediaType, "taken": taken, "companion": companion, "sidecars": sidecars})
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "%-19s %10s  %s\n", taken, FormatSize(size), name)
			}
		}
	}
	if title != "" && !found {
		return refused(fmt.Errorf("no album %q: sealbox client albums lists them", title))
	}
	return nil
}

func newClientExportCmd(f *clientFlags) *cobra.Command {
	x := library.Exporter{Layout: "album", Jobs: 4}
	cmd := &cobra.Command{
		Use:   "export DEST",
		Short: "Write the originals into a folder, byte for byte, each with its capture time",
		Long: `Downloads and opens every original into DEST (or one album's with --album). A second export
writes nothing that is already there. A file in DEST that is not the photo's export is never
replaced: the photo takes another name. A file damaged on the server is refused with its name and
album, the rest is exported, and the exit status is 1.`,
		Args: clientArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if x.Layout != "album" && x.Layout != "date" {
				return refused(fmt.Errorf("--layout is album or date, not %q", x.Layout))
			}
			a, err := openAccount(f)
			if err != nil {
				return err
			}
			x.Catalog, x.Dest, x.Report = a.catalog(), args[0], reporter(cmd, f.json)
			started := time.Now()
			sum, err := x.Export(cmd.Context())
			if err != nil {
				return serverError(err)
			}
			return finish(cmd, f.json, "exported", false, sum, started)
		},
	}
	cmd.Flags().StringVar(&x.Album, "album", "", "export only the album of this title")
	cmd.Flags().StringVar(&x.Layout, "layout", x.Layout, "album (DEST/ALBUM/NAME) or date (DEST/YYYY/MM/NAME)")
	cmd.Flags().IntVar(&x.Jobs, "jobs", x.Jobs, "originals downloaded at once")
	return cmd
}

func newClientShareCmd(f *clientFlags) *cobra.Command {
	var expires time.Duration
	var withPassphrase, fromStdin bool
	cmd := &cobra.Command{
		Use:   "share ALBUM|ASSET...",
		Short: "Make a link to albums or photos that opens in any browser, decrypted on the viewer's device",
		Long: `Prints a link https://HOST/s/ID#SECRET. The part after # is the key: it never reaches the
server, so whoever has the whole link can see what it shows, and the server cannot. An ASSET is
an asset id or a file name (sealbox client ls shows both). With --passphrase the link also asks
for a passphrase.`,
		Args: clientArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := openAccount(f)
			if err != nil {
				return err
			}
			passphrase := ""
			if withPassphrase || fromStdin {
				if passphrase, err = readSecret(cmd, fromStdin, "Passphrase", !fromStdin); err != nil {
					return refused(err)
				}
			}
			var until *time.Time
			if expires > 0 {
				t := time.Now().Add(expires).Truncate(time.Second)
				until = &t
			}
			title, assets, err := selectAssets(cmd.Context(), a, args)
			if err != nil {
				return err
			}
			link, err := library.Share(cmd.Context(), a.client, title, assets, passphrase, until)
			if err != nil {
				return serverError(err)
			}
			ix, err := a.profile.OpenIndex()
			if err != nil {
				return refused(err)
			}
			defer ix.Close()
			if err := ix.SaveLink(link); err != nil {
				return err
			}
			if f.json {
				emit(cmd.OutOrStdout(), link)
				return nil
			}
			fmt.Fprintln(cmd.OutOrStdout(), link.URL)
			return nil
		},
	}
	cmd.Flags().DurationVar(&expires, "expires", 0, "the link stops working after this long (e.g. 168h); default never")
	cmd.Flags().BoolVar(&withPassphrase, "passphrase", false, "ask for a passphrase the link's viewers must give too")
	cmd.Flags().BoolVar(&fromStdin, "passphrase-stdin", false, "read the passphrase from the first line of standard input")
	return cmd
}

// selectAssets finds what args name: every asset of an album of that
// title, or an asset by its id or file name. A file name that names
// different photos is refused, listing them; the same photo in several
// albums is picked once. The link's title is the first album's.
func selectAssets(ctx context.Context, a *account, args []string) (string, []library.Asset, error) {
	cat := a.catalog()
	ids, err := cat.Albums(ctx)
	if err != nil {
		return "", nil, serverError(err)
	}
	wanted := map[string]bool{}
	for _, arg := range args {
		wanted[arg] = true
	}
	matched := map[string]bool{}
	title := ""
	var picked []library.Asset
	// photos lists, by file name asked for, the distinct photos (by keyed
	// content hash) of that name: a name is not an asset's identity, and
	// two cameras' IMG_0001.JPG are two photos, only one of which the
	// person may mean to show.
	photos := map[string][]library.Asset{}
	for _, id := range ids {
		assets, _, err := cat.Assets(ctx, id)
		if err != nil {
			return "", nil, serverError(err)
		}
		for _, as := range assets {
			for _, key := range []string{as.AlbumTitle, as.Entry.AssetID, as.Meta.Name} {
				matched[key] = matched[key] || wanted[key]
			}
			switch {
			case wanted[as.AlbumTitle] || wanted[as.Entry.AssetID]:
				// named by its album or its id: picked
			case wanted[as.Meta.Name]:
				same := slices.ContainsFunc(photos[as.Meta.Name], func(p library.Asset) bool { return p.Meta.ContentHMAC == as.Meta.ContentHMAC })
				if same {
					continue // the same photo in another album: shown once
				}
				photos[as.Meta.Name] = append(photos[as.Meta.Name], as)
			default:
				continue
			}
			picked = append(picked, as)
			if title == "" {
				title = as.AlbumTitle
			}
		}
	}
	for _, arg := range args {
		if !matched[arg] {
			return "", nil, refused(fmt.Errorf("no album, asset or file named %q: sealbox client albums and ls list them", arg))
		}
		if found := photos[arg]; len(found) > 1 {
			var which []string
			for _, p := range found {
				which = append(which, fmt.Sprintf("%s in %s", p.Entry.AssetID, p.AlbumTitle))
			}
			return "", nil, refused(fmt.Errorf("%q names %d different photos (%s): give the asset id of the one to share (sealbox client ls ALBUM shows them)", arg, len(found), strings.Join(which, ", ")))
		}
	}
	return title, picked, nil
}

func newClientSharesCmd(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "shares",
		Short: "List the links this device made",
		Args:  clientArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := library.OpenProfile(f.profile)
			if err != nil {
				return refused(err)
			}
			ix, err := p.OpenIndex()
			if err != nil {
				return refused(err)
			}
			defer ix.Close()
			links, err := ix.Links()
			if err != nil {
				return err
			}
			for _, l := range links {
				if f.json {
					emit(cmd.OutOrStdout(), l)
					continue
				}
				until := "never expires"
				if l.ExpiresAt != nil {
					until = "until " + l.ExpiresAt.Format(time.RFC3339)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s  %-24s %4d assets, %s\n    %s\n", l.ID, l.Title, l.Assets, until, l.URL)
			}
			return nil
		},
	}
}

func newClientUnshareCmd(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "unshare ID",
		Short: "End a link at once: every viewer is refused from now on",
		Args:  clientArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := openAccount(f)
			if err != nil {
				return err
			}
			if err := a.client.RevokeShare(cmd.Context(), args[0]); err != nil {
				return serverError(err)
			}
			ix, err := a.profile.OpenIndex()
			if err != nil {
				return refused(err)
			}
			defer ix.Close()
			return ix.DropLink(args[0])
		},
	}
}

func newClientPasswdCmd(f *clientFlags) *cobra.Command {
	var fromStdin bool
	cmd := &cobra.Command{
		Use:   "passwd",
		Short: "Change the password: the keys' escrow is sealed again under it, and every other session ends",
		Long: `Asks for the current password, then the new one twice (with --password-stdin: the current
on the first line of standard input, the new one on the second). Your recovery key stays valid.`,
		Args: clientArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := openAccount(f)
			if err != nil {
				return err
			}
			current, next, err := readTwoSecrets(cmd, fromStdin, "Current password", "New password", true)
			if err != nil {
				return refused(err)
			}
			if len(next) < 8 {
				return refused(errors.New("the new password must be at least 8 characters"))
			}
			if err := library.ChangePassword(cmd.Context(), a.client, a.session, current, next); err != nil {
				return serverError(err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), "Password changed. Other devices sign in again with the new one.")
			return nil
		},
	}
	cmd.Flags().BoolVar(&fromStdin, "password-stdin", false, "read the current and the new password from the first two lines of standard input")
	return cmd
}

func newClientRecoverCmd(f *clientFlags) *cobra.Command {
	var email, code string
	var fromStdin bool
	cmd := &cobra.Command{
		Use:   "recover URL",
		Short: "Open the account's keys with the recovery key after a forgotten password was reset",
		Long: `When you forgot your password, the server's operator sets a new one (sealbox users
set-password); it signs you in but cannot open your photos' keys, which only you hold. recover
signs in with the new password, opens the keys with your recovery key and seals them again
under the new password. Asks for the password and the recovery key (with --password-stdin: the
password on the first line of standard input, the recovery key on the second).`,
		Args: clientArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, c, err := startSignIn(f, email, args[0])
			if err != nil {
				return err
			}
			password, typed, err := readTwoSecrets(cmd, fromStdin, "Password", "Recovery key", false)
			if err != nil {
				return refused(err)
			}
			recovery, err := sealed.ParseRecoveryKey(typed)
			if err != nil {
				return refused(fmt.Errorf("the recovery key is mistyped: %w", err))
			}
			if err := library.Recover(cmd.Context(), p, c, email, password, code, recovery); err != nil {
				return serverError(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Signed in as %s; your keys are sealed under the new password.\n", email)
			return nil
		},
	}
	cmd.Flags().StringVar(&email, "email", "", "the account's email")
	cmd.Flags().StringVar(&code, "code", "", "the second factor's current code, for an account that has one")
	cmd.Flags().BoolVar(&fromStdin, "password-stdin", false, "read the password and the recovery key from the first two lines of standard input")
	return cmd
}

// readTwoSecrets reads two secrets: the first two lines of standard input
// with fromStdin, else from the terminal (the second twice with confirm).
func readTwoSecrets(cmd *cobra.Command, fromStdin bool, first, second string, confirm bool) (string, string, error) {
	if fromStdin {
		lines, err := readLines(cmd, 2)
		if err != nil {
			return "", "", err
		}
		return lines[0], lines[1], nil
	}
	a, err := readSecret(cmd, false, first, false)
	if err != nil {
		return "", "", err
	}
	b, err := readSecret(cmd, false, second, confirm)
	return a, b, err
}

// readLines reads n lines of standard input.
func readLines(cmd *cobra.Command, n int) ([]string, error) {
	r := bufio.NewReader(cmd.InOrStdin())
	lines := make([]string, n)
	for i := range lines {
		line, err := r.ReadString('\n')
		if err != nil && (err != io.EOF || line == "") {
			return nil, fmt.Errorf("read line %d of standard input: %w", i+1, err)
		}
		lines[i] = strings.TrimRight(line, "\r\n")
	}
	return lines, nil
}

// syncBar is a sync's progress on a terminal: files and bytes done of the
// run's, the rate and the time left.
type syncBar struct {
	cmd   *cobra.Command
	bar   *progressbar.ProgressBar
	files int
	done  int
}

// newSyncBar is the terminal's progress bar, nil when standard output is
// no terminal or the output is JSON (a line per file then, as for scripts).
func newSyncBar(cmd *cobra.Command, asJSON bool) *syncBar {
	f, ok := cmd.OutOrStdout().(*os.File)
	if asJSON || !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return &syncBar{cmd: cmd}
}

func (b *syncBar) plan(files int, bytes int64) {
	b.files = files
	b.bar = progressbar.NewOptions64(bytes,
		progressbar.OptionSetWriter(b.cmd.ErrOrStderr()),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionShowElapsedTimeOnFinish(),
		progressbar.OptionSetDescription(fmt.Sprintf("0/%d files", files)),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish())
}

// report moves the bar with each file, and prints what failed above it.
func (b *syncBar) report(next func(library.Event)) func(library.Event) {
	return func(ev library.Event) {
		b.done++
		if b.bar != nil {
			b.bar.Describe(fmt.Sprintf("%d/%d files", b.done, b.files))
			b.bar.Add64(ev.Size)
		}
		if ev.What == "failed" {
			if b.bar != nil {
				b.bar.Clear()
			}
			next(ev)
		}
	}
}

func (b *syncBar) finish() {
	if b.bar != nil {
		b.bar.Finish()
	}
}

func newClientEscrowCmd(f *clientFlags) *cobra.Command {
	var fromStdin, off, on bool
	cmd := &cobra.Command{
		Use:   "escrow [--no-password-escrow | --password-escrow]",
		Short: "Show or switch how the server keeps the keys' escrow: under the password and the recovery key, or the recovery key only",
		Long: `By default the server keeps your keys' escrow sealed under your password and under your
recovery key, so a new device opens the keys with the password. --no-password-escrow keeps it
under the recovery key only: whoever holds the server's data then has no password to try
offline, and a new device gets the keys from a linked device (sealbox client link) or the
recovery key. --password-escrow seals it under the password again. Switching asks for the
password (with --password-stdin: the first line of standard input).`,
		Args: clientArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if off && on {
				return refused(errors.New("give --no-password-escrow or --password-escrow, not both"))
			}
			a, err := openAccount(f)
			if err != nil {
				return err
			}
			if off || on {
				password, err := readSecret(cmd, fromStdin, "Password", false)
				if err != nil {
					return refused(err)
				}
				if err := library.SetPasswordEscrow(cmd.Context(), a.client, a.session, a.keys, password, on); err != nil {
					return serverError(err)
				}
			}
			escrow, err := a.client.Escrow(cmd.Context())
			if err != nil {
				return serverError(err)
			}
			withPassword := sealed.HasPassphraseSlot(escrow)
			if f.json {
				emit(cmd.OutOrStdout(), map[string]bool{"password_escrow": withPassword})
			} else if withPassword {
				fmt.Fprintln(cmd.OutOrStdout(), "The escrow is sealed under your password and your recovery key: a new device opens the keys with the password.")
			} else {
				fmt.Fprintln(cmd.OutOrStdout(), "The escrow is sealed under your recovery key only: a new device gets the keys from a linked device (sealbox client link) or the recovery key.")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&off, "no-password-escrow", false, "keep the escrow under the recovery key only")
	cmd.Flags().BoolVar(&on, "password-escrow", false, "seal the escrow under the password again")
	cmd.Flags().BoolVar(&fromStdin, "password-stdin", false, "read the password from the first line of standard input")
	return cmd
}
