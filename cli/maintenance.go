package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
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
a complete backup. A generation keeps the store snapshot in chunks of 1 MiB named
by their SHA-256 (sealbox.db.chunks, listed by sealbox.db.index), and a new one
hard-links every chunk and blob the previous one holds, so it costs only what
changed; once it is complete, the oldest generations beyond N are removed.

One backup runs into DEST at a time: it holds DEST/.sealbox-backup.lock locked
(the file stays), and a second one into DEST meanwhile is refused at once.

Restore with sealbox restore DEST --data NEWDIR (the newest generation when DEST
holds generations). Do not start the server on DEST itself: it would write into
the backup; restore first (a generation is refused: its store is in chunks).

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
			snapshot := humanBytes(rep.SnapshotBytes)
			if rep.SnapshotChunks > 0 {
				snapshot += fmt.Sprintf(" in %d chunks (%d linked from the previous generation, %s written)", rep.SnapshotChunks, rep.ChunksLinked, humanBytes(rep.ChunkBytesWritten))
			}
			if rep.BlobsInline > 0 {
				linked += fmt.Sprintf(", %d inline in the snapshot", rep.BlobsInline)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backup written to %s: snapshot %s, %d blobs copied (%s)%s, %d already there, in %s\n",
				rep.Dest, snapshot, rep.BlobsCopied, humanBytes(rep.BytesCopied), linked, rep.BlobsSkipped, rep.Elapsed.Round(time.Millisecond))
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
				return fmt.Errorf("%s found in the store %s and the blob store %s", count(len(rep.Problems), "problem"), rep.Store, rep.BlobStore)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ok: the store %s is consistent and all %d referenced blobs are present%s in %s\n",
				rep.Store, rep.Blobs, map[bool]string{true: " and whole", false: ""}[deep], rep.BlobStore)
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
		mode := removing
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
		Short: "Verify a backup and copy it into a new data directory (--data), or into empty engines (--store, --blobs)",
		Long: `restore verifies BACKUP as check --deep does (every referenced blob is re-hashed
as it is copied; the store's structure and references are checked) and copies it
into the data directory given by --data, which must be missing or empty. BACKUP
is only read. When BACKUP holds generations (backup --keep), the newest is
restored. A backup that is not whole is refused and nothing is left behind.
A backup written by an older sealbox is migrated in the copy.

With --store postgres://... and/or --blobs s3://..., the records and/or the
blobs go into those engines instead, which must be empty (a missing bucket is
created), and the keys into --data: the way from one machine to several. Such a
restore that is interrupted is continued by running it again.`,
		Args: cobra.ExactArgs(1),
	}
	loc := new(Location)
	addLocationFlags(cmd.Flags(), loc)
	cmd.Flag("data").Usage = "the new data directory: receives the keys, and the records and blobs not sent to --store or --blobs"
	documentEnv(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ignored, err := bindLocationEnv(cmd.Flags())
		if err != nil {
			return err
		}
		if len(ignored) > 0 {
			fmt.Fprintln(cmd.ErrOrStderr(), "restore: "+ignoredLocationEnv(ignored))
		}
		if err := loc.validate(flagNamer(cmd.Flags())); err != nil {
			return err
		}
		log := cmd.ErrOrStderr()
		opts := admin.RestoreOptions{
			Version:     server.Version,
			OpenTimeout: adminOpenTimeout,
			Files:       storeFiles{},
			BeforeMigrate: func(from int, pending []kv.Migration) {
				fmt.Fprintf(log, "restore: the backup has store format %d; migrating the copy to %d\n", from, kv.FormatVersion)
				for _, m := range pending {
					fmt.Fprintf(log, "restore: migration to format %d: %s\n", m.To, m.Name)
				}
			},
		}
		if loc.Store != "" || loc.Blobs != "" {
			return restoreToEngines(cmd, args[0], *loc, opts)
		}
		bar := newProgressBar("restore", log)
		rep, err := admin.Restore(cmd.Context(), args[0], loc.Data, opts, bar.update)
		bar.finish()
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "restored %s into %s: %d blobs (%s) verified, in %s; start it with: %s\n",
			rep.From, rep.Dest, rep.Blobs, humanBytes(rep.Bytes), rep.Elapsed.Round(time.Millisecond), serveCommand(Location{Data: rep.Dest}))
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

func newCompactCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "compact",
		Short: "Give the store file's free pages back to the filesystem (server stopped)",
		Long: `compact rewrites the data directory's store file (sealbox.db) without the pages
bbolt keeps free after deletes: the file never shrinks by itself, so after a burst
that was deleted again (a drained relay flood, a mass sweep) it stays at its peak.

Stop the server first: compact refuses while a server holds the store or the
data directory, and holds the data directory's lock itself until it is done, so
a server started meanwhile is refused rather than opening the old file. The
compacted copy is written beside the store, fsynced, opened again and checked
(bbolt's page check, and every record compared with the original) before it is
renamed over sealbox.db. The file as it was is kept as sealbox.db.old: delete it
once the server has started on the compacted store. It needs free space for the
compacted copy (at most the live data's size).

With --store postgres://, there is nothing to do: PostgreSQL's autovacuum reuses
freed space by itself.`,
		Args: cobra.NoArgs,
	}
	loc := addDataFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		for _, name := range []string{"data", "store", "blobs"} {
			if err := bindFlagEnv(cmd.Flag(name)); err != nil {
				return err
			}
		}
		if err := loc.validate(flagNamer(cmd.Flags())); err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		if loc.networked() {
			fmt.Fprintf(out, "the store is in PostgreSQL (%s): its autovacuum reuses freed space by itself; nothing to do\n", loc.describeStore())
			return nil
		}
		sock := filepath.Join(loc.Data, adminSocket)
		if _, err := admin.Dial(sock, adminAnswerTimeout); err == nil {
			return fmt.Errorf("a server is running on %s (it answers on %s): stop it, then compact", loc.Data, sock)
		} else if !errors.Is(err, admin.ErrNoServer) {
			return fmt.Errorf("%w; not compacting the store while that process may hold it", err)
		}
		path := filepath.Join(loc.Data, dbFile)
		// Held until the compacted file has the store's name: a serve
		// starting meanwhile is refused, never opening the file that
		// becomes sealbox.db.old.
		unlock, err := lockDataDir(loc.Data)
		switch {
		case errors.Is(err, errDataDirLocked):
			return fmt.Errorf("a sealbox serve or compact is running on %s (%w): stop it, then compact", loc.Data, err)
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("%s holds no sealbox store (no %s): give the data directory with --data or SEALBOX_DATA", loc.Data, dbFile)
		case err != nil:
			return err
		}
		defer unlock()
		rep, err := compactStoreFile(path)
		switch {
		case errors.Is(err, kv.ErrLocked):
			return fmt.Errorf("%s is held by another process (a running server?): stop it, then compact", path)
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("%s holds no sealbox store (no %s): give the data directory with --data or SEALBOX_DATA", loc.Data, dbFile)
		case err != nil:
			return err
		}
		fmt.Fprintf(out, "compacted %s: %s before, %s after (%d records, checked)\n", rep.Path, humanBytes(rep.BytesBefore), humanBytes(rep.BytesAfter), rep.Keys)
		fmt.Fprintf(out, "the store as it was is kept as %s: once the server has started on the compacted store, delete it: rm %s\n", rep.Old, rep.Old)
		return nil
	}
	return cmd
}
