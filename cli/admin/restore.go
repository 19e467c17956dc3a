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
	"sealbox/kv/durable"
	"sealbox/server/content"
)

// RestoreOptions tune a restore.
type RestoreOptions struct {
	// Version is the sealbox version recorded in the restored store.
	Version string
	// BeforeMigrate is told which migrations run when the backup was
	// written by an older sealbox (kv.Options.BeforeMigrate).
	BeforeMigrate func(from int, pending []kv.Migration)
	// OpenTimeout bounds the wait for the backup's file lock.
	OpenTimeout time.Duration
	// Files opens and copies the backup's store file and its copy.
	Files StoreFiles
}

// RestoreReport says what a restore wrote.
type RestoreReport struct {
	// From is the backup restored: the one named, or its newest generation.
	From    string        `json:"from"`
	Dest    string        `json:"dest"`
	Blobs   int           `json:"blobs"`
	Bytes   int64         `json:"bytes"`
	Elapsed time.Duration `json:"elapsed"`
	// Owner is "uid:gid" when restore, run as root, gave the restored files
	// to the target directory's owner; "" when it changed no owner.
	Owner string `json:"owner,omitempty"`
}

// maxRestoreProblems bounds the problems a refused restore lists.
const maxRestoreProblems = 20

// Restore makes dst a data directory holding the backup at src, and proves
// it whole on the way: every blob the store references is copied and
// re-hashed (check --deep), and the copy passes the store's own checks. src
// is a backup (a data directory) or a folder of generations, whose newest
// is taken. dst must be missing or empty; src is only ever read. A backup
// that fails verification is refused, and dst is left as it was found.
//
// A backup written by an older sealbox is migrated in the copy, never in
// src, after BeforeMigrate says which migrations run.
func Restore(ctx context.Context, src, dst string, opts RestoreOptions, progress func(Progress)) (rep RestoreReport, err error) {
	start := time.Now()
	rep.Dest = dst
	if src, err = backupSource(src); err != nil {
		return rep, err
	}
	rep.From = src
	// Everything that is not a blob is checked before anything is written:
	// a refused backup leaves nothing behind.
	chunked := hasChunkedSnapshot(src)
	if chunked {
		if _, err := readSnapshotIndex(src); err != nil {
			return rep, err
		}
	} else if err := requireRegular(filepath.Join(src, DBFile)); err != nil {
		return rep, err
	}
	keys, err := readKeys(src)
	if err != nil {
		return rep, err
	}
	existed, err := prepareEmptyDir(dst)
	if err != nil {
		return rep, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, undoRestore(dst, existed))
		}
	}()

	if chunked {
		// The restored store is a live one: only the server's user reads
		// it, as when serve creates it.
		_, err = restoreChunks(src, filepath.Join(dst, DBFile), 0o600)
	} else {
		err = copyStore(opts.Files, filepath.Join(src, DBFile), filepath.Join(dst, DBFile), opts.OpenTimeout)
	}
	if err != nil {
		return rep, err
	}
	if err := writeKeys(dst, keys); err != nil {
		return rep, err
	}
	store, err := opts.Files.Open(filepath.Join(dst, DBFile), kv.Options{Version: opts.Version, BeforeMigrate: opts.BeforeMigrate})
	if err != nil {
		return rep, err
	}
	defer store.Close()
	problems, err := restoreBlobs(ctx, store, src, dst, &rep, progress)
	if err != nil {
		return rep, err
	}
	// The blobs were just hashed as they were copied; what is left of check
	// --deep is the store's own consistency and its references.
	more, err := storeProblems(store)
	if err != nil {
		return rep, err
	}
	if err := notWhole(src, append(problems, more...), "nothing restored"); err != nil {
		return rep, err
	}
	// A restore is a new instance, with an id of its own.
	dstBlobs, err := blobs.Open(filepath.Join(dst, BlobsDir))
	if err != nil {
		return rep, err
	}
	if err := markRestored(store, dstBlobs); err != nil {
		return rep, err
	}
	if rep.Owner, err = giveToOwner(dst, existed); err != nil {
		return rep, err
	}
	if err := durable.SyncDir(dst); err != nil {
		return rep, err
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// restoreBlobs copies every blob the restored store references from the
// backup src into dst, re-hashing each, and returns the problems found (a
// blob missing, or not whole); err is for what stops the copy.
func restoreBlobs(ctx context.Context, store *kv.Store, src, dst string, rep *RestoreReport, progress func(Progress)) ([]string, error) {
	dstBlobs, err := blobs.Open(filepath.Join(dst, BlobsDir))
	if err != nil {
		return nil, err
	}
	srcBlobs := blobs.OpenReadOnly(filepath.Join(src, BlobsDir))
	var problems []string
	p, err := startProgress(store)
	if err != nil {
		return nil, err
	}
	report := func() {
		if progress != nil {
			progress(p)
		}
	}
	report()
	open := func(hash string) (io.ReadCloser, error) {
		f, _, err := srcBlobs.Open(hash)
		return f, err
	}
	err = content.WalkPages(ctx, store, copyPage, func(files, inline []kv.Blob) error {
		// An inline blob was restored with the store, whose inline blobs
		// storeProblems re-hashes.
		for _, b := range inline {
			p.BlobsDone++
			p.BytesDone += b.Size
			rep.Blobs++
			rep.Bytes += b.Size
		}
		results, err := copyBlobPage(files, open, dstBlobs)
		if err != nil {
			return err
		}
		for _, r := range results {
			p.BlobsDone++
			p.BytesDone += r.blob.Size
			switch r.outcome {
			case copyMissing:
				problems = append(problems, fmt.Sprintf("blob %s: referenced but missing from the backup", r.blob.Hash))
			case copyCorrupt:
				problems = append(problems, fmt.Sprintf("blob %s: its bytes no longer hash to its name", r.blob.Hash))
			case copyWrongSize:
				problems = append(problems, fmt.Sprintf("blob %s: %d bytes, %d recorded", r.blob.Hash, r.size, r.blob.Size))
			default:
				rep.Blobs++
				rep.Bytes += r.size
			}
		}
		report()
		return nil
	})
	return problems, err
}

// backupSource is the backup restore reads from src: src itself when it is
// a backup, its newest generation when it is a folder of generations.
// A folder that is both is refused: its store is most likely a stray one a
// server started on the folder made (serve --data), and restoring it would
// restore an empty instance instead of the newest generation.
func backupSource(src string) (string, error) {
	newest := NewestGeneration(src)
	switch {
	case hasChunkedSnapshot(src):
		return src, nil
	case hasStore(src) && newest != "":
		return "", fmt.Errorf("%s is both a backup (it holds %s) and a folder of backup generations (the newest is %s): a server started on the folder most likely made that %s; restore the generation itself (sealbox restore %s), and move the stray files out of the folder", src, DBFile, newest, DBFile, newest)
	case hasStore(src):
		return src, nil
	case newest == "":
		return "", fmt.Errorf("%s holds no backup: no %s, and no generations", src, DBFile)
	}
	return newest, nil
}

// prepareEmptyDir makes sure dir exists and is empty, and reports whether
// it existed before.
func prepareEmptyDir(dir string) (existed bool, err error) {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, os.MkdirAll(dir, 0o700)
	case err != nil:
		return false, err
	case len(entries) > 0:
		return true, fmt.Errorf("%s is not empty: restore only into a new or empty directory, never over data", dir)
	}
	return true, nil
}

// undoRestore puts dst back as prepareEmptyDir found it: missing, or empty.
func undoRestore(dst string, existed bool) error {
	if !existed {
		return os.RemoveAll(dst)
	}
	entries, err := os.ReadDir(dst)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// copyStore copies the store file src to dst durably with files, as of one
// read transaction of src.
func copyStore(files StoreFiles, src, dst string, timeout time.Duration) error {
	// The restored store is a live one: only the server's user reads it,
	// as when serve creates it.
	f, err := createExclusive(dst, 0o600)
	if err != nil {
		return err
	}
	_, err = files.Copy(src, f, timeout)
	if errors.Is(err, kv.ErrLocked) {
		err = fmt.Errorf("%s is in use by a running server: take a backup of it with sealbox backup, and restore that", filepath.Dir(src))
	}
	return durable.Close(f, err)
}
