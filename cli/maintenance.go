package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"sealbox/cli/admin"
	"sealbox/kv"
	"sealbox/server"
)

func newBackupCmd() *cobra.Command {
	var keep int
	cmd := &cobra.Command{
		Use:   "backup DEST",
		Short: "Write a consistent, restorable copy of the data directory to DEST (incremental; --keep N for generations)",
		Long: `backup writes a snapshot of the store, the server key and every blob the snapshot
references. It works while the server runs.

Without --keep, DEST is one data directory updated in place: blobs already in it
are skipped, so running it nightly into the same folder is cheap.

With --keep N, DEST holds dated generations (DEST/2026-11-24T033000Z, ...), each
a complete data directory. A new generation hard-links every blob the previous
one holds, so it costs only its new blobs; once it is complete, the oldest
generations beyond N are removed.

Restore with sealbox restore DEST --data NEWDIR (the newest generation when DEST
holds generations). Do not start the server on DEST itself: it would write into
the backup (and in a folder of generations make a stray store); restore first.

While a server runs, it writes the backup (this command asks it over the admin
socket), so DEST must be writable by the server's user.`,
		Args: cobra.ExactArgs(1),
	}
	data := addDataFlag(cmd)
	cmd.Flags().IntVar(&keep, "keep", 0, "keep the newest N dated generations under DEST (0: DEST is one backup, updated in place)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if keep < 0 {
			return fmt.Errorf("--keep %d: want 0 (one backup) or the number of generations to keep", keep)
		}
		// The running server does the copying: give it a path that does not
		// depend on this process's working directory.
		dest, err := filepath.Abs(args[0])
		if err != nil {
			return err
		}
		return withAdmin(cmd, data, readOnly, func(a admin.Admin) error {
			bar := newProgressBar("backup", cmd.ErrOrStderr())
			rep, err := a.Backup(cmd.Context(), dest, admin.BackupOptions{Keep: keep}, bar.update)
			bar.finish()
			if err != nil {
				return err
			}
			linked := ""
			if keep > 0 {
				linked = fmt.Sprintf(", %d linked from the previous generation", rep.BlobsLinked)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backup written to %s: snapshot %s, %d blobs copied (%s)%s, %d already there, in %s\n",
				rep.Dest, humanBytes(rep.SnapshotBytes), rep.BlobsCopied, humanBytes(rep.BytesCopied), linked, rep.BlobsSkipped, rep.Elapsed.Round(time.Millisecond))
			for _, g := range rep.Removed {
				fmt.Fprintf(cmd.OutOrStdout(), "removed generation %s (more than %d)\n", g, keep)
			}
			return nil
		})
	}
	return cmd
}

func newCheckCmd() *cobra.Command {
	var deep bool
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Verify the store and that every referenced blob exists (--deep: and hashes to its name)",
		Args:  cobra.NoArgs,
	}
	data := addDataFlag(cmd)
	cmd.Flags().BoolVar(&deep, "deep", false, "re-hash every blob")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return withAdmin(cmd, data, readOnly, func(a admin.Admin) error {
			rep, err := a.Check(cmd.Context(), deep)
			if err != nil {
				return err
			}
			for _, p := range rep.Problems {
				fmt.Fprintln(cmd.OutOrStdout(), "problem:", p)
			}
			if len(rep.Problems) > 0 {
				return fmt.Errorf("%d problems found", len(rep.Problems))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ok: the store is consistent and all %d referenced blobs are present%s\n",
				rep.Blobs, map[bool]string{true: " and whole", false: ""}[deep])
			return nil
		})
	}
	return cmd
}

// defaultGCGrace is how old an unreferenced blob file must be before gc
// removes it: far longer than any upload takes between writing a blob and
// recording it.
const defaultGCGrace = 24 * time.Hour

func newGCCmd() *cobra.Command {
	var dryRun bool
	var grace time.Duration
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Remove unreferenced blob files older than the grace period, and expired records",
		Args:  cobra.NoArgs,
	}
	data := addDataFlag(cmd)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "report what would be removed, remove nothing")
	cmd.Flags().DurationVar(&grace, "grace", defaultGCGrace, "keep unreferenced blobs younger than this")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		mode := readWrite
		if dryRun {
			mode = readOnly
		}
		return withAdmin(cmd, data, mode, func(a admin.Admin) error {
			rep, err := a.GC(cmd.Context(), dryRun, grace)
			if err != nil {
				return err
			}
			verb := "removed"
			if dryRun {
				verb = "would remove"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %d unreferenced blobs (%s freed), %d abandoned partial uploads (%s), %d temp files, %d expired records\n",
				verb, rep.BlobsRemoved, humanBytes(rep.BytesFreed), rep.PartialsRemoved, humanBytes(rep.PartialBytes), rep.TempRemoved, rep.RecordsSwept)
			return nil
		})
	}
	return cmd
}

// progressBar draws blobs and bytes on one redrawn line on a terminal, and
// writes a plain line every 10% (and at the end) otherwise.
type progressBar struct {
	label    string
	w        io.Writer
	terminal bool
	lastTick int
	last     admin.Progress
}

func newProgressBar(label string, w io.Writer) *progressBar {
	f, ok := w.(*os.File)
	return &progressBar{label: label, w: w, terminal: ok && term.IsTerminal(int(f.Fd())), lastTick: -1}
}

func (p *progressBar) update(pr admin.Progress) {
	p.last = pr
	pct := 100
	if pr.BytesTotal > 0 {
		pct = int(pr.BytesDone * 100 / pr.BytesTotal)
	}
	if p.terminal {
		const width = 30
		fill := strings.Repeat("#", pct*width/100) + strings.Repeat(".", width-pct*width/100)
		fmt.Fprintf(p.w, "\r[%s] %3d%%  blobs %d/%d  %s/%s", fill, pct, pr.BlobsDone, pr.BlobsTotal, humanBytes(pr.BytesDone), humanBytes(pr.BytesTotal))
		return
	}
	if tick := pct / 10; tick != p.lastTick {
		p.lastTick = tick
		fmt.Fprintf(p.w, "%s: %d%%, blobs %d/%d, %s of %s\n", p.label, pct, pr.BlobsDone, pr.BlobsTotal, humanBytes(pr.BytesDone), humanBytes(pr.BytesTotal))
	}
}

func (p *progressBar) finish() {
	if p.terminal {
		fmt.Fprintln(p.w)
	}
}

// humanBytes renders a byte count with a binary unit.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func newRestoreCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "restore BACKUP",
		Short: "Verify a backup and copy it into a new data directory (--data)",
		Long: `restore verifies BACKUP as check --deep does (every referenced blob is re-hashed
as it is copied; the store's structure and references are checked) and copies it
into the data directory given by --data, which must be missing or empty. BACKUP
is only read. When BACKUP holds generations (backup --keep), the newest is
restored. A backup that is not whole is refused and nothing is left behind.
A backup written by an older sealbox is migrated in the copy.`,
		Args: cobra.ExactArgs(1),
	}
	// restore writes a data directory: a store in PostgreSQL or blobs in a
	// bucket are restored with those engines' own tools (see the README).
	data := new(string)
	cmd.Flags().StringVar(data, "data", DefaultDataDir, "the new data directory, missing or empty")
	documentEnv(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := bindFlagEnv(cmd.Flag("data")); err != nil {
			return err
		}
		log := cmd.ErrOrStderr()
		bar := newProgressBar("restore", log)
		rep, err := admin.Restore(cmd.Context(), args[0], *data, admin.RestoreOptions{
			Version:     server.Version,
			OpenTimeout: adminOpenTimeout,
			BeforeMigrate: func(from int, pending []kv.Migration) {
				fmt.Fprintf(log, "restore: the backup has store format %d; migrating the copy to %d\n", from, kv.FormatVersion)
				for _, m := range pending {
					fmt.Fprintf(log, "restore: migration to format %d: %s\n", m.To, m.Name)
				}
			},
		}, bar.update)
		bar.finish()
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "restored %s into %s: %d blobs (%s) verified, in %s; start it with: sealbox serve --data %s\n",
			rep.From, rep.Dest, rep.Blobs, humanBytes(rep.Bytes), rep.Elapsed.Round(time.Millisecond), rep.Dest)
		switch {
		case rep.Owner != "":
			fmt.Fprintf(log, "restore: the restored files belong to %s, the owner of %s\n", rep.Owner, rep.Dest)
		case os.Geteuid() == 0:
			fmt.Fprintf(log, "restore: the restored files belong to root; if the server runs as another user, give them to it: chown -R USER: %s\n", rep.Dest)
		}
		return nil
	}
	return cmd
}
