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

	"sealbox/server/admin"
)

func newBackupCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backup DEST",
		Short: "Write a consistent, restorable copy of the data directory to DEST (incremental)",
		Long: `backup writes a snapshot of the store, the server key and every blob the snapshot
references to DEST. Blobs already in DEST are skipped, so running it nightly into the same
folder is cheap. It works while the server runs. DEST is itself a data directory:
restore by pointing the server at it (sealbox serve --data DEST).`,
		Args: cobra.ExactArgs(1),
	}
	data := addDataFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		// The running server does the copying: give it a path that does not
		// depend on this process's working directory.
		dest, err := filepath.Abs(args[0])
		if err != nil {
			return err
		}
		return withAdmin(cmd, data, readOnly, func(a admin.Admin) error {
			bar := newProgressBar(cmd.ErrOrStderr())
			rep, err := a.Backup(cmd.Context(), dest, bar.update)
			bar.finish()
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backup written to %s: snapshot %s, %d blobs copied (%s), %d already there, in %s\n",
				rep.Dest, humanBytes(rep.SnapshotBytes), rep.BlobsCopied, humanBytes(rep.BytesCopied), rep.BlobsSkipped, rep.Elapsed.Round(time.Millisecond))
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
	w        io.Writer
	terminal bool
	lastTick int
	last     admin.Progress
}

func newProgressBar(w io.Writer) *progressBar {
	f, ok := w.(*os.File)
	return &progressBar{w: w, terminal: ok && term.IsTerminal(int(f.Fd())), lastTick: -1}
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
		fmt.Fprintf(p.w, "backup: %d%%, blobs %d/%d, %s of %s\n", pct, pr.BlobsDone, pr.BlobsTotal, humanBytes(pr.BytesDone), humanBytes(pr.BytesTotal))
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
