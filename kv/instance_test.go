package kv_test

import (
	"errors"
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/kvtest"
)

// TestInstanceAndServed: a fresh store has no id and never served (its
// leases are housekeeping); AdoptInstance records an id once and refuses
// another; an account makes the store one that served.
func TestInstanceAndServed(t *testing.T) {
	s, _ := kvtest.MustOpenStore(t)
	if in, err := s.Instance(); err != nil || in != (kv.Instance{}) {
		t.Fatalf("a fresh store: %+v %v", in, err)
	}
	if _, err := s.TryLease("sweep", "node/run", time.Minute); err != nil {
		t.Fatal(err)
	}
	if served, err := s.Served(); err != nil || served {
		t.Fatalf("a store holding a lease only served: %v %v", served, err)
	}
	if err := s.AdoptInstance("instance-a", true); err != nil {
		t.Fatal(err)
	}
	if in, _ := s.Instance(); in.ID != "instance-a" || !in.Marking {
		t.Fatalf("adopted while marking: %+v", in)
	}
	if err := s.AdoptInstance("instance-a", false); err != nil {
		t.Fatal(err)
	}
	if err := s.AdoptInstance("instance-b", false); !errors.Is(err, kv.ErrOtherInstance) {
		t.Fatalf("another id: %v, want ErrOtherInstance", err)
	}
	if in, _ := s.Instance(); in.ID != "instance-a" || in.Marking {
		t.Fatalf("after marking: %+v", in)
	}
	if err := s.AddAccount(&kv.Account{ID: "acct-1", Email: "one@example.org"}); err != nil {
		t.Fatal(err)
	}
	if served, err := s.Served(); err != nil || !served {
		t.Fatalf("a store with an account never served: %v %v", served, err)
	}
}

// TestRestoreIntoAStore: BeginRestore marks an empty store (keeping the id
// of a store that started but never served), resumes a restore of the same
// source and refuses another's; CopyRecordsFrom copies the records but
// keeps the target's mark and id; FinishRestore ends it; a store that holds
// records is refused.
func TestRestoreIntoAStore(t *testing.T) {
	src, _ := kvtest.MustOpenStore(t)
	if err := src.AdoptInstance("the-backups-instance", false); err != nil {
		t.Fatal(err)
	}
	if err := src.AddAccount(&kv.Account{ID: "acct-1", Email: "one@example.org"}); err != nil {
		t.Fatal(err)
	}
	dst, _ := kvtest.MustOpenStore(t)
	if err := dst.AdoptInstance("started-once", false); err != nil {
		t.Fatal(err)
	}
	id, err := dst.BeginRestore("backup-1", "new-id")
	if err != nil || id != "started-once" {
		t.Fatalf("begin: %q %v, want the id of the store that started once", id, err)
	}
	if err := dst.CopyRecordsFrom(src); err != nil {
		t.Fatal(err)
	}
	if in, _ := dst.Instance(); in.ID != "started-once" || in.Restoring != "backup-1" {
		t.Fatalf("after the copy: %+v, want the target's id and mark kept", in)
	}
	if again, err := dst.BeginRestore("backup-1", "other-new-id"); err != nil || again != id {
		t.Fatalf("resume: %q %v", again, err)
	}
	if _, err := dst.BeginRestore("backup-2", "x"); !errors.Is(err, kv.ErrNotEmpty) {
		t.Fatalf("another backup into an unfinished restore: %v", err)
	}
	if err := dst.FinishRestore(id); err != nil {
		t.Fatal(err)
	}
	if in, _ := dst.Instance(); in.ID != id || in.Restoring != "" {
		t.Fatalf("finished: %+v", in)
	}
	if _, err := dst.UserSummary("one@example.org"); err != nil {
		t.Fatalf("the copied account: %v", err)
	}
	if _, err := dst.BeginRestore("backup-1", "x"); !errors.Is(err, kv.ErrNotEmpty) {
		t.Fatalf("a restore into a store with records: %v", err)
	}
}

// TestReleaseLeasesOf: a node's restart releases every lease a holder of
// its id holds, and no other.
func TestReleaseLeasesOf(t *testing.T) {
	s, _ := kvtest.MustOpenStore(t)
	for name, holder := range map[string]string{"tus/a": "node-1/old-run/1", "sweep": "node-1/old-run", "tus/b": "node-10/run/1", "tus/c": "node-2/run/1"} {
		if held, err := s.TryLease(name, holder, time.Minute); err != nil || !held {
			t.Fatalf("take %s: %v %v", name, held, err)
		}
	}
	if n, err := s.ReleaseLeasesOf("node-1/"); err != nil || n != 2 {
		t.Fatalf("released %d (%v), want 2", n, err)
	}
	for name, want := range map[string]string{"tus/a": "", "sweep": "", "tus/b": "node-10/run/1", "tus/c": "node-2/run/1"} {
		if holder, _, err := s.LeaseHolder(name); err != nil || holder != want {
			t.Fatalf("%s held by %q (%v), want %q", name, holder, err, want)
		}
	}
}
