package library

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch syncs roots, then again whenever something changes below them,
// until ctx ends. A change is synced once nothing below the roots has
// changed for settle (a file being copied in is synced once it is whole;
// one still changing when it is read is tried again at the next change).
// Every rescan the folders are watched afresh and synced whole, so a
// folder that was unmounted and mounted again, or a new subfolder, is
// picked up: at the latest after rescan, at once when the watch sees it.
func (s *Syncer) Watch(ctx context.Context, roots []string, settle, rescan time.Duration, done func(Summary, error)) error {
	for {
		w, err := fsnotify.NewWatcher()
		if err != nil {
			return err
		}
		watchTree(w, roots)
		sum, err := s.Sync(ctx, existing(roots))
		if ctx.Err() != nil {
			w.Close()
			return nil
		}
		done(sum, err)
		waitForChange(ctx, w, settle, rescan)
		w.Close()
		if ctx.Err() != nil {
			return nil
		}
	}
}

// existing are the roots that are there now: an unmounted one is synced
// again when it is back.
func existing(roots []string) []string {
	var out []string
	for _, r := range roots {
		if fi, err := os.Stat(r); err == nil && fi.IsDir() {
			out = append(out, r)
		}
	}
	return out
}

// watchTree watches every folder below roots, and each root's parent, so
// a root that disappears and comes back is seen.
func watchTree(w *fsnotify.Watcher, roots []string) {
	for _, r := range roots {
		w.Add(filepath.Dir(r))
		filepath.WalkDir(r, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				w.Add(p)
			}
			return nil
		})
	}
}

// waitForChange returns once a change was followed by settle without
// another, or after rescan without any, or when ctx ends.
func waitForChange(ctx context.Context, w *fsnotify.Watcher, settle, rescan time.Duration) {
	full := time.NewTimer(rescan)
	defer full.Stop()
	var quiet <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-full.C:
			return
		case _, ok := <-w.Events:
			if !ok {
				return
			}
			quiet = time.After(settle)
		case <-w.Errors:
		case <-quiet:
			return
		}
	}
}
