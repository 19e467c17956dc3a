package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"sealbox/blobs"
	"sealbox/kv"
)

// Names inside a data directory (and so inside a backup, which is one).
const (
	DBFile   = "sealbox.db"
	KeyFile  = "server.key"
	BlobsDir = "blobs"
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

// BackupReport says what a backup wrote.
type BackupReport struct {
	Dest          string        `json:"dest"`
	SnapshotBytes int64         `json:"snapshot_bytes"`
	BlobsCopied   int           `json:"blobs_copied"`
	BlobsSkipped  int           `json:"blobs_skipped"`
	BytesCopied   int64         `json:"bytes_copied"`
	Missing       []string      `json:"missing,omitempty"`
	Elapsed       time.Duration `json:"elapsed"`
}

// Backup writes a consistent, restorable copy of the data directory to dest:
// a snapshot of the store as of one read transaction, the server key, and
// every blob the snapshot references. Blobs already in dest are skipped
// (content addresses never change), so nightly backups copy only what is
// new. Every file is written durably; the snapshot is written under a
// temporary name and renamed last, so an interrupted backup leaves the
// previous one whole. dest is then itself a data directory: `sealbox serve
// --data dest` starts on it.
func (o *Ops) Backup(ctx context.Context, dest string, progress func(Progress)) (BackupReport, error) {
	start := time.Now()
	rep := BackupReport{Dest: dest}
	if err := os.MkdirAll(dest, 0o700); err != nil {
		return rep, err
	}
	if same, err := sameDir(dest, o.DataDir); err != nil || same {
		return rep, errors.Join(err, fmt.Errorf("the backup destination must not be the data directory"))
	}
	destBlobs, err := blobs.Open(filepath.Join(dest, BlobsDir))
	if err != nil {
		return rep, err
	}
	tmp := filepath.Join(dest, DBFile+".tmp")
	if rep.SnapshotBytes, err = o.writeSnapshot(tmp); err != nil {
		return rep, err
	}
	snap, err := kv.Open(tmp, kv.Options{ReadOnly: true})
	if err != nil {
		return rep, err
	}
	err = o.copyBlobs(ctx, snap, destBlobs, &rep, progress)
	snap.Close()
	if err != nil {
		return rep, err
	}
	if err := copyFileDurably(filepath.Join(o.DataDir, KeyFile), filepath.Join(dest, KeyFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return rep, err
	}
	if err := os.Rename(tmp, filepath.Join(dest, DBFile)); err != nil {
		return rep, err
	}
	if err := blobs.SyncDir(dest); err != nil {
		return rep, err
	}
	rep.Elapsed = time.Since(start)
	if len(rep.Missing) > 0 {
		return rep, fmt.Errorf("%d referenced blobs are missing from the data directory and could not be backed up (run `sealbox check`)", len(rep.Missing))
	}
	return rep, nil
}

func (o *Ops) writeSnapshot(path string) (int64, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := o.Store.WriteSnapshot(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// copyBlobs copies every blob the snapshot references and that dest lacks.
func (o *Ops) copyBlobs(ctx context.Context, snap *kv.Store, dest *blobs.Store, rep *BackupReport, progress func(Progress)) error {
	var p Progress
	if err := eachBlob(snap, func(b kv.Blob) error {
		p.BlobsTotal++
		p.BytesTotal += b.Size
		return nil
	}); err != nil {
		return err
	}
	report := func() {
		if progress != nil {
			progress(p)
		}
	}
	report()
	err := eachBlob(snap, func(b kv.Blob) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		p.BlobsDone++
		p.BytesDone += b.Size
		if dest.Exists(b.Hash) {
			rep.BlobsSkipped++
			report()
			return nil
		}
		src, _, err := o.Blobs.Open(b.Hash)
		if errors.Is(err, blobs.ErrNotFound) {
			rep.Missing = append(rep.Missing, b.Hash)
			report()
			return nil
		}
		if err != nil {
			return err
		}
		// Put re-hashes what it copies: a corrupted source blob fails here
		// instead of spreading into the backup.
		info, _, err := dest.Put(src, b.Hash, 0)
		src.Close()
		if err != nil {
			return fmt.Errorf("copy blob %s: %w", b.Hash, err)
		}
		rep.BlobsCopied++
		rep.BytesCopied += info.Size
		report()
		return nil
	})
	return err
}

// eachBlob visits every recorded blob a page at a time, holding no read
// transaction while fn touches files.
func eachBlob(s *kv.Store, fn func(kv.Blob) error) error {
	after := ""
	for {
		page, err := s.Blobs(after, blobPage)
		if err != nil {
			return err
		}
		for _, b := range page {
			if err := fn(b); err != nil {
				return err
			}
		}
		if len(page) < blobPage {
			return nil
		}
		after = page[len(page)-1].Hash
	}
}

// copyFileDurably copies src to dst through a temporary file that is
// fsynced and renamed into place.
func copyFileDurably(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, dst)
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
