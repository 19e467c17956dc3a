package admin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sealbox/blobs"
	"sealbox/kv"
	"sealbox/kv/durable"
	"sealbox/server/content"
	"sealbox/server/ids"
)

// EngineTarget is where RestoreToEngines writes: a record store and a blob
// store already open (PostgreSQL and a bucket, or either one beside the
// data directory's own), and the data directory that receives the keys.
type EngineTarget struct {
	DataDir string
	Store   *kv.Store
	// Blobs is nil when the bucket does not exist yet: CreateBlobs then
	// creates it, once the backup and the targets have been checked and
	// just before the restore's first write.
	Blobs       blobs.Engine
	CreateBlobs func() (blobs.Engine, error)
	// StoreAt and BlobsAt name them in messages, never with a password.
	StoreAt, BlobsAt string
}

// RestoreToEngines restores the backup at src (a data directory, or a
// folder of generations whose newest is taken) into the empty engines of
// dst, proving it whole on the way as Restore does: the store is checked
// in a scratch copy (migrated there when the backup is older) before
// anything is written to dst, and every blob is re-hashed as it is copied.
//
// Nothing serves from dst until the restore has finished: the store is
// marked as a restore's target first, with the new instance's id (a restore
// is a new instance: the one the backup was taken of may still run), and
// the blob store gets that id's marker before the first blob. So a restore
// that was interrupted is resumed by running it again, and continues where
// it stopped: records are written again, and blobs already copied (each
// verified when it was) are skipped. A store that holds records of its own,
// or of another restore, and a blob store holding blobs of anything else
// are refused before anything is written.
func RestoreToEngines(ctx context.Context, src string, dst EngineTarget, opts RestoreOptions, progress func(Progress)) (rep RestoreReport, err error) {
	start := time.Now()
	rep.Dest = dst.StoreAt + " and " + dst.BlobsAt
	if src, err = resolveBackup(src); err != nil {
		return rep, err
	}
	rep.From = src
	// The keys are read (regular files of their formats) and compared with
	// what --data holds before anything is written.
	keys, err := readKeys(src)
	if err != nil {
		return rep, err
	}
	if err := checkKeysFit(keys, dst.DataDir); err != nil {
		return rep, err
	}
	scratch, source, cleanup, err := openScratchCopy(src, dst.DataDir, opts)
	if err != nil {
		return rep, err
	}
	defer cleanup()
	if problems, err := storeProblems(scratch); err != nil || len(problems) > 0 {
		return rep, errors.Join(err, notWhole(src, problems, "nothing restored"))
	}
	if err := checkBlobTarget(dst, source); err != nil {
		return rep, err
	}
	if dst.Blobs == nil {
		if dst.Blobs, err = dst.CreateBlobs(); err != nil {
			return rep, err
		}
	}
	// The keys go first: a node started on the unfinished restore then
	// finds the backup's keys, makes none of its own, and is refused.
	if err := os.MkdirAll(dst.DataDir, 0o700); err != nil {
		return rep, err
	}
	if err := writeKeys(dst.DataDir, keys); err != nil {
		return rep, err
	}
	if err := durable.SyncDir(dst.DataDir); err != nil {
		return rep, err
	}
	id, err := dst.Store.BeginRestore(source, ids.UUID(rand.Reader))
	if err != nil {
		return rep, err
	}
	if err := dst.Blobs.MarkInstance(id); err != nil {
		return rep, err
	}
	if err := dst.Store.CopyRecordsFrom(scratch); err != nil {
		return rep, fmt.Errorf("copy the records into %s: %w", dst.StoreAt, err)
	}
	problems, err := copyVerified(ctx, scratch, blobs.OpenReadOnly(filepath.Join(src, BlobsDir)), dst.Blobs, &rep, progress)
	if err != nil {
		return rep, fmt.Errorf("%w (run the same restore again to continue)", err)
	}
	if len(problems) > 0 {
		return rep, notWhole(src, problems, dst.StoreAt+" and "+dst.BlobsAt+" hold an unfinished restore that nothing serves from; empty them before restoring another backup")
	}
	if err := dst.Store.FinishRestore(id); err != nil {
		return rep, err
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// resolveBackup is the backup src names: src itself, or the newest of the
// generations it holds.
func resolveBackup(src string) (string, error) {
	if hasSnapshot(src) {
		return src, nil
	}
	if newest := NewestGeneration(src); newest != "" {
		return newest, nil
	}
	return "", fmt.Errorf("%s holds no backup: no %s, and no generations", src, DBFile)
}

// checkKeysFit refuses a data directory holding key files other than the
// backup's: the restore would overwrite another instance's keys. The same
// keys (a restore run again) fit.
func checkKeysFit(keys map[string][]byte, dataDir string) error {
	for _, name := range keyFiles {
		have, err := os.ReadFile(filepath.Join(dataDir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if want, ok := keys[name]; !ok || string(have) != string(want) {
			return fmt.Errorf("%s already holds a %s other than the backup's: restore the keys into a new or empty --data directory, never over another instance's", dataDir, name)
		}
	}
	return nil
}

// scratchDir is where a restore into engines keeps its copy of the backup's
// store, inside the data directory (on a disk sized for data, not a
// temporary file system); a run removes what an interrupted one left.
const scratchDir = ".restore-scratch"

// openScratchCopy copies the backup's store into a scratch file in dataDir
// and opens it, migrated when the backup is older; the backup itself is
// only read. source names the backup's store by the hash of what was
// copied, the same on every run of one backup. cleanup closes and removes
// the copy.
func openScratchCopy(src, dataDir string, opts RestoreOptions) (scratch *kv.Store, source string, cleanup func(), err error) {
	dir := filepath.Join(dataDir, scratchDir)
	if err := os.RemoveAll(dir); err != nil {
		return nil, "", nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", nil, err
	}
	path := filepath.Join(dir, DBFile)
	var root string
	if hasChunkedSnapshot(src) {
		// A chunked snapshot's root names it as the hash of a copy does.
		root, err = restoreChunks(src, path, 0o600)
	} else {
		root, err = copyHashed(opts.Files, filepath.Join(src, DBFile), path, opts.OpenTimeout)
	}
	if errors.Is(err, kv.ErrLocked) {
		err = fmt.Errorf("%s is in use by a running server: take a backup of it with sealbox backup, and restore that", src)
	}
	if err == nil {
		scratch, err = opts.Files.Open(path, kv.Options{Version: opts.Version, BeforeMigrate: opts.BeforeMigrate})
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", nil, err
	}
	source = src + " (sha256 " + root[:16] + ")"
	return scratch, source, func() { scratch.Close(); os.RemoveAll(dir) }, nil
}

// copyHashed copies the store file src into the new file dst with files and
// returns the SHA-256 of what it copied, hex.
func copyHashed(files StoreFiles, src, dst string, timeout time.Duration) (string, error) {
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	_, err = files.Copy(src, io.MultiWriter(f, h), timeout)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return hex.EncodeToString(h.Sum(nil)), err
}

// storeProblems is what a restore checks of a store besides its blob files
// (hashed as they are copied): its own consistency (bbolt's page check),
// references to unrecorded blobs, its transparency log, and the blobs it
// keeps inline, each re-hashed as check --deep does.
func storeProblems(store *kv.Store) ([]string, error) {
	var problems []string
	integrity, err := store.CheckIntegrity()
	if err != nil {
		return nil, err
	}
	for _, e := range integrity {
		problems = append(problems, "store: "+e.Error())
	}
	dangling, err := store.DanglingReferences(maxRestoreProblems)
	if err != nil {
		return nil, err
	}
	logProblems, err := store.CheckLog(maxRestoreProblems)
	if err != nil {
		return nil, err
	}
	inline, err := store.InlineProblems(true, maxRestoreProblems)
	return append(append(append(problems, dangling...), logProblems...), inline...), err
}

// notWhole refuses a backup with problems; after says what was left.
func notWhole(src string, problems []string, after string) error {
	if len(problems) == 0 {
		return nil
	}
	shown := problems[:min(len(problems), maxRestoreProblems)]
	return fmt.Errorf("the backup %s is not whole (%d problems), %s:\n  %s", src, len(problems), after, strings.Join(shown, "\n  "))
}

// checkBlobTarget refuses a blob store that holds anything but what an
// unfinished restore of source into dst.Store copied: blobs without an
// instance marker, or another instance's marker. The blob store gets the
// restore's marker before its first blob, so on a resumed run its blobs
// are known to be this restore's.
func checkBlobTarget(dst EngineTarget, source string) error {
	if dst.Blobs == nil {
		return nil // a bucket still to be created holds nothing
	}
	in, err := dst.Store.Instance()
	if err != nil {
		return err
	}
	marker, err := dst.Blobs.Instance()
	if err != nil {
		return err
	}
	if marker != "" && marker == in.ID && in.Restoring == source {
		return nil
	}
	held, err := blobs.HoldsBlobs(dst.Blobs)
	switch {
	case err != nil:
		return err
	case held:
		return fmt.Errorf("%s already holds blobs that are not from this restore: restore only into an empty blob store, never over data", dst.BlobsAt)
	case marker != "" && marker != in.ID:
		return fmt.Errorf("%s belongs to instance %s (its %s marker), not to %s: restore into an empty blob store of its own", dst.BlobsAt, marker, blobs.InstanceMarker, dst.StoreAt)
	}
	return nil
}

// copyVerified copies every blob the store records from src to dst,
// re-hashing each as it is written; a blob dst already holds at its
// recorded size (copied, and verified, by an earlier run) is skipped. It
// returns the problems found (missing, corrupt or mis-sized blobs).
func copyVerified(ctx context.Context, store *kv.Store, src *blobs.Dir, dst blobs.Engine, rep *RestoreReport, progress func(Progress)) ([]string, error) {
	p, err := startProgress(store)
	if err != nil {
		return nil, err
	}
	var problems []string
	// done counts b as restored: copied, found copied, or an inline blob,
	// restored with the store (whose inline blobs storeProblems re-hashed).
	done := func(b kv.Blob) {
		rep.Blobs++
		rep.Bytes += b.Size
	}
	// visited counts b as passed, whatever became of it.
	visited := func(b kv.Blob) {
		p.BlobsDone++
		p.BytesDone += b.Size
		if progress != nil {
			progress(p)
		}
	}
	inline := func(b kv.Blob) error {
		done(b)
		visited(b)
		return nil
	}
	err = content.Walk(ctx, store, inline, func(b kv.Blob) error {
		defer visited(b)
		if have, err := alreadyCopied(dst, b); err != nil {
			return err
		} else if have {
			done(b)
			return nil
		}
		problem, err := copyBlob(src, dst, b)
		if problem != "" {
			problems = append(problems, problem)
		} else if err == nil {
			done(b)
		}
		return err
	})
	return problems, err
}

// alreadyCopied reports whether dst holds b whole, copied by an earlier run
// of the restore: at its recorded size and, in a local blob directory,
// re-hashed, since a file there may have been changed since that run (a
// bucket's objects are not rewritten in place, and reading each back would
// cost the whole download again). A damaged file is removed, to be copied
// again.
func alreadyCopied(dst blobs.Engine, b kv.Blob) (bool, error) {
	info, err := dst.Stat(b.Hash)
	switch {
	case errors.Is(err, blobs.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	case info.Size != b.Size:
		return false, nil
	}
	if _, local := dst.(*blobs.Dir); !local {
		return true, nil
	}
	switch err := dst.Verify(b.Hash); {
	case errors.Is(err, blobs.ErrCorrupt):
		return false, dst.Remove(b.Hash)
	case err != nil:
		return false, err
	}
	return true, nil
}

// copyBlob copies one blob, verifying its hash and size; a problem of the
// backup is returned as a sentence, a failure to copy as an error.
func copyBlob(src *blobs.Dir, dst blobs.Engine, b kv.Blob) (problem string, err error) {
	f, _, err := src.Open(b.Hash)
	if errors.Is(err, blobs.ErrNotFound) {
		return fmt.Sprintf("blob %s: referenced but missing from the backup", b.Hash), nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	info, _, err := dst.Put(f, b.Hash, 0)
	switch {
	case errors.Is(err, blobs.ErrHashMismatch):
		return fmt.Sprintf("blob %s: its bytes no longer hash to its name", b.Hash), nil
	case err != nil:
		return "", fmt.Errorf("copy blob %s: %w", b.Hash, err)
	case info.Size != b.Size:
		return fmt.Sprintf("blob %s: %d bytes, %d recorded", b.Hash, info.Size, b.Size), nil
	}
	return "", nil
}

// markCopy gives the blob store of a copy of a data directory (a backup,
// or a directory restore) the instance id its store carries, so that serve
// starts on it and gc accepts it.
func markCopy(store *kv.Store, dst blobs.Engine) error {
	in, err := store.Instance()
	if err != nil || in.ID == "" {
		return err
	}
	if err := dst.MarkInstance(in.ID); errors.Is(err, blobs.ErrMarked) {
		return fmt.Errorf("the destination holds a copy of another instance: %w; give another destination", err)
	} else if err != nil {
		return err
	}
	return nil
}

// markRestored makes a restored data directory an instance of its own: a
// new id in its store and its blobs directory.
func markRestored(store *kv.Store, dst blobs.Engine) error {
	id := ids.UUID(rand.Reader)
	if err := dst.MarkInstance(id); err != nil {
		return err
	}
	return store.FinishRestore(id)
}
