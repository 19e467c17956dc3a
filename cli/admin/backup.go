package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"sealbox/blobs"
	"sealbox/kv"
	"sealbox/kv/durable"
	"sealbox/server/content"
)

// Names inside a data directory (and so inside a backup, which is one).
const (
	DBFile  = "sealbox.db"
	KeyFile = "server.key"
	// LogKeyFile holds the transparency log's signing key: a restore
	// without it could sign no checkpoint clients already trust.
	LogKeyFile = "transparency.key"
	BlobsDir   = "blobs"
)

// blobPage is how many blob records one read transaction lists.
const blobPage = 1000

// Progress reports a backup's advance through the blobs its snapshot
// references.
type Progress struct {
	BlobsDone  int   `json:"blobs_done"`
	BlobsTotal int   `json:"blobs_total"`
	BytesDone  int64 `json:"bytes_done"`
	BytesTotal int64 `json:"bytes_total"`
}

// BackupOptions says how a backup is laid out in its destination.
type BackupOptions struct {
	// Keep, when above 0, makes the destination a set of dated generations,
	// each a complete data directory, of which the newest Keep are kept.
	// At 0 the destination is one data directory, updated in place.
	Keep int `json:"keep,omitempty"`
}

// BackupReport says what a backup wrote.
type BackupReport struct {
	Dest          string `json:"dest"`
	SnapshotBytes int64  `json:"snapshot_bytes"`
	BlobsCopied   int    `json:"blobs_copied"`
	BlobsSkipped  int    `json:"blobs_skipped"`
	// BlobsLinked counts blobs shared with the previous generation by a
	// hard link instead of a copy.
	BlobsLinked int `json:"blobs_linked,omitempty"`
	// BlobsInline counts blobs the store keeps inline, which travel in
	// the snapshot and have no file to copy.
	BlobsInline int   `json:"blobs_inline,omitempty"`
	BytesCopied int64 `json:"bytes_copied"`
	// SnapshotChunks counts the chunks of a generation's store snapshot
	// (see SnapshotIndex), ChunksLinked those shared with the previous
	// generation by a hard link, and ChunkBytesWritten the bytes of those
	// it had to write.
	SnapshotChunks    int   `json:"snapshot_chunks,omitempty"`
	ChunksLinked      int   `json:"chunks_linked,omitempty"`
	ChunkBytesWritten int64 `json:"chunk_bytes_written,omitempty"`
	// Generation names the generation written, and Removed the older ones
	// removed after it was complete (with Keep).
	Generation string        `json:"generation,omitempty"`
	Removed    []string      `json:"removed,omitempty"`
	Missing    []string      `json:"missing,omitempty"`
	Elapsed    time.Duration `json:"elapsed"`
}

// Backup writes a consistent, restorable copy of the data directory: a
// snapshot of the store as of one read transaction, the server key, and
// every blob the snapshot references. Every file is written durably and the
// snapshot is renamed into place last, so an interrupted backup leaves the
// previous one whole. What it writes is itself a data directory: `sealbox
// serve --data` starts on it.
//
// Without Keep, dest is that data directory, and blobs already in it are
// skipped (content addresses never change), so nightly backups into one
// folder copy only what is new. With Keep, dest holds dated generations
// (see backupGeneration), whose store snapshot is in chunks (SnapshotIndex):
// a generation is a backup to restore, not a data directory.
//
// One backup runs into a destination at a time: another one into dest is
// refused while this one runs (lockDest).
func (o *Ops) Backup(ctx context.Context, dest string, opts BackupOptions, progress func(Progress)) (BackupReport, error) {
	start := time.Now()
	if err := os.MkdirAll(dest, 0o700); err != nil {
		return BackupReport{Dest: dest}, explainUnwritable(err, dest)
	}
	if err := checkPrivateDir(dest); err != nil {
		return BackupReport{Dest: dest}, err
	}
	if same, err := sameDir(dest, o.DataDir); err != nil || same {
		return BackupReport{Dest: dest}, errors.Join(err, fmt.Errorf("the backup destination must not be the data directory"))
	}
	unlock, err := lockDest(dest)
	if err != nil {
		return BackupReport{Dest: dest}, err
	}
	defer unlock()
	var rep BackupReport
	if opts.Keep > 0 {
		rep, err = o.backupGeneration(ctx, dest, opts.Keep, start, progress)
	} else {
		if !hasStore(dest) && hasGenerations(dest) {
			return BackupReport{Dest: dest}, fmt.Errorf("%s holds backup generations: give --keep, or another destination", dest)
		}
		rep, err = o.backupInto(ctx, dest, nil, nil, progress)
	}
	rep.Elapsed = time.Since(start)
	return rep, err
}

// BackupLockFile is the file in a backup destination's root that a backup
// holds locked while it runs (lockDest). It is no generation and no store:
// restore and the generation listing pass over it.
const BackupLockFile = ".sealbox-backup.lock"

// lockDest takes the backup lock of dest (BackupLockFile, created private
// when missing) for a backup's whole run, or refuses at once when another
// backup holds it: two runs into one destination damage each other, one
// removing the other's temporary snapshot and renaming its own half-written
// one over the store, or removing the other's partial generation. A cron
// backup may well start while a manual one runs. The lock is flock(2)'s,
// which ends with the process however it ends, so a killed backup leaves
// none behind; the file stays, since removing it could unlink the one the
// next run has just locked.
func lockDest(dest string) (unlock func(), err error) {
	path := filepath.Join(dest, BackupLockFile)
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	busy, err := LockExclusive(f)
	if busy || err != nil {
		f.Close()
		if busy {
			return nil, fmt.Errorf("another backup into %s is running (it holds %s): this one is refused, and the destination left to it", dest, BackupLockFile)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// backupInto writes a backup into the data directory dir. A blob dir lacks
// is hard-linked from prev when prev holds it, and copied otherwise. The
// store snapshot is a whole file (DBFile) when chunks is nil, and chunks
// (writeChunkedSnapshot) when it names the previous generation to share
// them with ("" for none).
func (o *Ops) backupInto(ctx context.Context, dir string, prev *blobs.Dir, chunks *string, progress func(Progress)) (BackupReport, error) {
	rep := BackupReport{Dest: dir}
	keys, err := readKeys(o.DataDir)
	if err != nil {
		return rep, err
	}
	destBlobs, err := blobs.Open(filepath.Join(dir, BlobsDir))
	if err != nil {
		return rep, err
	}
	tmp := filepath.Join(dir, DBFile+".tmp")
	var index snapshotIndex
	if chunks == nil {
		rep.SnapshotBytes, err = o.writeSnapshot(tmp)
	} else {
		var cr chunkReport
		index, cr, err = o.writeChunkedSnapshot(dir, *chunks, tmp)
		rep.SnapshotBytes, rep.SnapshotChunks, rep.ChunksLinked, rep.ChunkBytesWritten = index.Size, len(index.Chunks), cr.Linked, cr.BytesWritten
	}
	if err != nil {
		return rep, err
	}
	snap, err := o.Files.Open(tmp, kv.Options{ReadOnly: true})
	if err != nil {
		return rep, err
	}
	// The inline blobs travel in the snapshot: re-hashed there, as a blob
	// file is when it is copied, so damage fails the backup instead of
	// spreading into it. A snapshot that is the previous generation's, byte
	// for byte, holds the inline blobs that were re-hashed when that one
	// was written: they are not read again.
	if chunks == nil || !sameSnapshot(*chunks, index) {
		err = inlineWhole(snap)
	}
	if err == nil {
		err = o.copyBlobs(ctx, snap, destBlobs, prev, &rep, progress)
	}
	if err == nil {
		err = markCopy(snap, destBlobs)
	}
	snap.Close()
	if err != nil {
		return rep, err
	}
	if err := writeKeys(dir, keys); err != nil {
		return rep, err
	}
	if chunks == nil {
		err = os.Rename(tmp, filepath.Join(dir, DBFile))
	} else if err = os.Remove(tmp); err == nil {
		err = writeSnapshotIndex(dir, index)
	}
	if err != nil {
		return rep, err
	}
	if err := durable.SyncDir(dir); err != nil {
		return rep, err
	}
	if len(rep.Missing) > 0 {
		return rep, fmt.Errorf("%d referenced blobs are missing from the data directory and could not be backed up (run `sealbox check`)", len(rep.Missing))
	}
	return rep, nil
}

// inlineWhole fails when a blob the snapshot keeps inline is missing, of
// another size than recorded, or no longer hashes to its name, naming each.
func inlineWhole(snap *kv.Store) error {
	problems, err := snap.InlineProblems(true, maxRestoreProblems)
	if err != nil || len(problems) == 0 {
		return err
	}
	return fmt.Errorf("the store's inline blobs are not whole (run `sealbox check --deep`), the backup was not written:\n  %s", strings.Join(problems, "\n  "))
}

// generationLayout names a generation by when its backup started, in UTC;
// names sort in time order.
const generationLayout = "2006-01-02T150405Z"

// partialPrefix marks a generation still being written. It is renamed to
// its final name once complete, so a directory with the prefix is never a
// backup: an interrupted run leaves one behind, and the next run removes it.
const partialPrefix = ".partial-"

// backupGeneration writes a new generation under root, sharing every blob
// and snapshot chunk the newest complete generation already holds by a hard
// link (so a generation costs only its new blobs and changed chunks, and
// removing any generation frees only what no other one links), then removes
// the oldest generations beyond keep, and only then: a failed backup never
// costs an old one. The chunks it links are only ever linked, never
// written, so an interrupted run leaves the generations it shares them with
// as they were.
func (o *Ops) backupGeneration(ctx context.Context, root string, keep int, start time.Time, progress func(Progress)) (BackupReport, error) {
	if hasStore(root) {
		return BackupReport{Dest: root}, fmt.Errorf("%s holds a single backup, not generations: give --keep another destination", root)
	}
	gens, err := generations(root)
	if err != nil {
		return BackupReport{Dest: root}, err
	}
	if err := removePartials(root); err != nil {
		return BackupReport{Dest: root}, err
	}
	// Names sort in time order. Two backups in one second, or a clock that
	// went back, get a suffix after the newest name, so the new generation
	// still sorts last.
	base := start.UTC().Format(generationLayout)
	if len(gens) > 0 && base <= gens[len(gens)-1] {
		base = gens[len(gens)-1]
	}
	name := base
	for n := 1; slices.Contains(gens, name); n++ {
		name = fmt.Sprintf("%s-%d", base, n)
	}
	var prev *blobs.Dir
	prevDir := ""
	if len(gens) > 0 {
		prevDir = filepath.Join(root, gens[len(gens)-1])
		prev = blobs.OpenReadOnly(filepath.Join(prevDir, BlobsDir))
	}
	partial := filepath.Join(root, partialPrefix+name)
	rep, err := o.backupInto(ctx, partial, prev, &prevDir, progress)
	rep.Dest, rep.Generation = filepath.Join(root, name), name
	if err != nil {
		return rep, err
	}
	if err := os.Rename(partial, rep.Dest); err != nil {
		return rep, err
	}
	if err := durable.SyncDir(root); err != nil {
		return rep, err
	}
	gens = append(gens, name)
	for len(gens) > keep {
		if err := os.RemoveAll(filepath.Join(root, gens[0])); err != nil {
			return rep, fmt.Errorf("the new generation %s is complete, but removing %s failed: %w", name, gens[0], err)
		}
		rep.Removed = append(rep.Removed, gens[0])
		gens = gens[1:]
	}
	return rep, durable.SyncDir(root)
}

// generations lists the complete generations under root, oldest first.
func generations(root string) ([]string, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	var gens []string
	for _, e := range entries {
		if e.IsDir() && isGeneration(e.Name()) && hasSnapshot(filepath.Join(root, e.Name())) {
			gens = append(gens, e.Name())
		}
	}
	slices.Sort(gens)
	return gens, nil
}

// isGeneration reports whether name is a generation's name.
func isGeneration(name string) bool {
	if len(name) < len(generationLayout) {
		return false
	}
	_, err := time.Parse(generationLayout, name[:len(generationLayout)])
	return err == nil
}

// hasGenerations reports whether root holds at least one generation.
func hasGenerations(root string) bool {
	gens, err := generations(root)
	return err == nil && len(gens) > 0
}

// hasStore reports whether dir holds a store file.
func hasStore(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, DBFile))
	return err == nil
}

// removePartials removes what interrupted generation backups left behind.
func removePartials(root string) error {
	entries, err := os.ReadDir(root)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), partialPrefix) {
			if err := os.RemoveAll(filepath.Join(root, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// NewestGeneration returns the newest complete generation under root, or
// "" when root holds none.
func NewestGeneration(root string) string {
	gens, err := generations(root)
	if err != nil || len(gens) == 0 {
		return ""
	}
	return filepath.Join(root, gens[len(gens)-1])
}

// writeSnapshot writes the store's snapshot into a new file at path (a
// temporary name, renamed once the backup is complete).
func (o *Ops) writeSnapshot(path string) (int64, error) {
	f, err := createTemp(path, storeMode)
	if err != nil {
		return 0, err
	}
	n, err := o.Store.WriteSnapshot(f)
	return n, durable.Close(f, err)
}

// copyBlobs gives dest every blob the snapshot references that it lacks:
// a hard link to prev's file when prev holds it, else a copy, a page of
// copies at a time (copyBlobPage).
func (o *Ops) copyBlobs(ctx context.Context, snap *kv.Store, dest, prev *blobs.Dir, rep *BackupReport, progress func(Progress)) error {
	p, err := startProgress(snap)
	if err != nil {
		return err
	}
	report := func() {
		if progress != nil {
			progress(p)
		}
	}
	report()
	pending := make([]kv.Blob, 0, copyPage)
	flush := func() error {
		err := o.copyPending(pending, dest, rep)
		pending = pending[:0]
		report()
		return err
	}
	inline := func(b kv.Blob) error {
		p.BlobsDone++
		p.BytesDone += b.Size
		rep.BlobsInline++ // in the snapshot already
		report()
		return nil
	}
	err = content.Walk(ctx, snap, inline, func(b kv.Blob) error {
		p.BlobsDone++
		p.BytesDone += b.Size
		if dest.Exists(b.Hash) {
			rep.BlobsSkipped++
			return nil
		}
		if prev != nil {
			linked, err := dest.LinkFrom(prev, b.Hash)
			if err != nil {
				return fmt.Errorf("link blob %s from the previous generation: %w", b.Hash, err)
			}
			if linked {
				rep.BlobsLinked++
				return nil
			}
		}
		if pending = append(pending, b); len(pending) < copyPage {
			return nil
		}
		return flush()
	})
	if err == nil {
		err = flush()
	}
	return err
}

// copyPending copies a page of blobs from the data directory into dest.
// A blob missing from the data directory is listed in the report; one whose
// bytes no longer hash to its name fails the backup instead of spreading
// into it.
func (o *Ops) copyPending(page []kv.Blob, dest *blobs.Dir, rep *BackupReport) error {
	open := func(hash string) (io.ReadCloser, error) {
		f, _, err := o.Blobs.Open(hash)
		return f, err
	}
	results, err := copyBlobPage(page, open, dest)
	if err != nil {
		return err
	}
	for _, r := range results {
		switch r.outcome {
		case copyMissing:
			rep.Missing = append(rep.Missing, r.blob.Hash)
		case copyCorrupt:
			return fmt.Errorf("copy blob %s: %w", r.blob.Hash, blobs.ErrHashMismatch)
		default:
			rep.BlobsCopied++
			rep.BytesCopied += r.size
		}
	}
	return nil
}

// startProgress is a pass over the store's blobs before its first one: the
// totals the store keeps of its blob records (each blob once), read instead
// of counted by a pass of their own.
func startProgress(s *kv.Store) (Progress, error) {
	count, size, err := s.BlobTotals()
	return Progress{BlobsTotal: int(count), BytesTotal: size}, err
}

func sameDir(a, b string) (bool, error) {
	fa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	fb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(fa, fb), nil
}
