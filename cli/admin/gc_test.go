package admin_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sealbox/blobs"
	"sealbox/cli/admin"
	"sealbox/kv"
	"sealbox/kv/kvtest"
)

// TestGCHoldsItsLease: a gc run holds the "gc" lease in the store, so it
// refuses to start, saying why, while a gc on another node sharing the store
// holds it; a dry run removes nothing and needs no lease; a finished run
// gives the lease up.
func TestGCHoldsItsLease(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	store, err := kvtest.Open(filepath.Join(dir, "sealbox.db"), kv.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	blobStore, err := blobs.Open(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	ops := &admin.Ops{DataDir: dir, Store: store, Blobs: blobStore, Files: kvtest.StoreFiles{}}
	ctx := context.Background()

	if held, err := store.TryLease("gc", "gc/other-node", time.Minute); err != nil || !held {
		t.Fatalf("the other node's gc: %v %v", held, err)
	}
	_, err = ops.GC(ctx, false, time.Hour)
	if !errors.Is(err, admin.ErrGCRunning) || !strings.Contains(err.Error(), "gc/other-node") {
		t.Fatalf("gc while another runs: %v", err)
	}
	if _, err := ops.GC(ctx, true, time.Hour); err != nil {
		t.Fatalf("a dry run while another gc runs: %v", err)
	}
	// The other node's run ends (or its lease lapses): this one runs, and
	// leaves the lease free.
	now = now.Add(time.Minute)
	if _, err := ops.GC(ctx, false, time.Hour); err != nil {
		t.Fatal(err)
	}
	if holder, _, err := store.LeaseHolder("gc"); err != nil || holder != "" {
		t.Fatalf("after gc the lease is held by %q (%v)", holder, err)
	}
}
