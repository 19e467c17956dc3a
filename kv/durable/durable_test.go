package durable_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"sealbox/kv/durable"
)

// file records the order of Sync and Close and fails them as told.
type file struct {
	calls          []string
	syncErr, close error
}

func (f *file) Sync() error  { f.calls = append(f.calls, "sync"); return f.syncErr }
func (f *file) Close() error { f.calls = append(f.calls, "close"); return f.close }

func TestCloseKeepsTheFirstError(t *testing.T) {
	errWrite, errSync, errClose := errors.New("write"), errors.New("sync"), errors.New("close")
	for _, tc := range []struct {
		name      string
		write     error
		f         file
		want      error
		wantCalls string
	}{
		{"written", nil, file{}, nil, "[sync close]"},
		{"write failed: no fsync, still closed", errWrite, file{close: errClose}, errWrite, "[close]"},
		{"fsync failed: still closed", nil, file{syncErr: errSync, close: errClose}, errSync, "[sync close]"},
		{"close failed", nil, file{close: errClose}, errClose, "[sync close]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.f
			if got := durable.Close(&f, tc.write); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			if got := fmt.Sprint(f.calls); got != tc.wantCalls {
				t.Errorf("calls: got %s, want %s", got, tc.wantCalls)
			}
		})
	}
}

func TestSyncDir(t *testing.T) {
	dir := t.TempDir()
	if err := durable.SyncDir(dir); err != nil {
		t.Fatalf("SyncDir of a directory: %v", err)
	}
	if err := durable.SyncDir(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("SyncDir of a missing directory: got %v, want not exist", err)
	}
}
