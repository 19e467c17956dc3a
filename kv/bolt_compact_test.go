package kv_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/bolt"
	"sealbox/kv/kvtest"
)

// boltStoreWithData is a closed bbolt store holding one account and a
// live relay channel, "sbx_rl_1"; its path is returned.
func boltStoreWithData(t *testing.T, fill func(s *kv.Store)) string {
	t.Helper()
	c := kvtest.NewClockAt(time.Now())
	path := filepath.Join(t.TempDir(), "sealbox.db")
	s, err := kvtest.Open(path, kv.Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustAccount(t, s, c, 1)
	if err := s.IssueEnrollmentCode("acct-1", "sbx_en_1", "222222222222", c.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RedeemEnrollmentCode("sbx_en_1", false, func([]byte) string { return "sbx_rl_1" }, c.Now().Add(time.Hour), kv.RelayLimits{}); err != nil {
		t.Fatal(err)
	}
	if fill != nil {
		fill(s)
	}
	return path
}

// wantStoreWhole opens the store at path and reads back what
// boltStoreWithData wrote.
func wantStoreWhole(t *testing.T, path string) {
	t.Helper()
	s, err := kvtest.Open(path, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if a, err := s.Account("acct-1"); err != nil || a.Email != "u1@example.org" {
		t.Fatalf("the account: %+v, %v", a, err)
	}
	if _, err := s.DrainRelay("sbx_rl_1", kv.ToEnrollee); err != nil {
		t.Fatalf("the relay channel: %v", err)
	}
	if problems, err := s.CheckIntegrity(); err != nil || len(problems) > 0 {
		t.Fatalf("the store's page check: %v, %v", problems, err)
	}
}

// TestCompactShrinksTheStoreAfterADrainedRelayFlood: a relay mailbox
// filled with 8 MiB and drained leaves the file at its peak size (bbolt
// keeps freed pages); compaction brings it under half, keeps every record,
// and keeps the file as it was under .old.
func TestCompactShrinksTheStoreAfterADrainedRelayFlood(t *testing.T) {
	path := boltStoreWithData(t, func(s *kv.Store) {
		payload := bytes.Repeat([]byte{0xA5}, 64<<10)
		for range 128 {
			if err := s.AppendRelay("sbx_rl_1", kv.ToEnrollee, payload, kv.RelayLimits{MailboxCapacity: 1 << 20}); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := s.DrainRelay("sbx_rl_1", kv.ToEnrollee); err != nil || len(got) != 128 {
			t.Fatalf("drain: %d payloads, %v", len(got), err)
		}
	})
	rep, err := bolt.CompactFile(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compacted after a drained 8 MiB relay flood: %d bytes before, %d after, %d keys", rep.BytesBefore, rep.BytesAfter, rep.Keys)
	if rep.BytesAfter*2 >= rep.BytesBefore {
		t.Fatalf("the store went from %d to %d bytes, want under half", rep.BytesBefore, rep.BytesAfter)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != rep.BytesAfter {
		t.Fatalf("the store file: %v, %v", fi, err)
	}
	if fi, err := os.Stat(rep.Old); err != nil || fi.Size() != rep.BytesBefore {
		t.Fatalf("the old file kept as %s: %v, %v", rep.Old, fi, err)
	}
	if rep.Keys == 0 {
		t.Fatal("no keys counted")
	}
	wantStoreWhole(t, path)
	wantStoreWhole(t, rep.Old)
}

// TestCompactRefusesAStoreInUse: a store a server holds is not compacted;
// the wait for its lock is bounded and said.
func TestCompactRefusesAStoreInUse(t *testing.T) {
	path := boltStoreWithData(t, nil)
	s, err := kvtest.Open(path, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := bolt.CompactFile(path, 50*time.Millisecond); !errors.Is(err, kv.ErrLocked) {
		t.Fatalf("got %v, want ErrLocked", err)
	}
	if _, err := os.Stat(path + ".compact"); !os.IsNotExist(err) {
		t.Fatalf("a refused compaction left a file behind: %v", err)
	}
}

// TestCompactInterruptedLeavesTheStoreUsable: what a compaction killed
// midway leaves (a partial .compact file; a .old link) does not touch the
// store, which opens whole; the next compaction replaces both, and never
// writes through a symlink planted at its temporary name.
func TestCompactInterruptedLeavesTheStoreUsable(t *testing.T) {
	path := boltStoreWithData(t, nil)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".compact", raw[:len(raw)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(path, path+".old"); err != nil {
		t.Fatal(err)
	}
	wantStoreWhole(t, path)
	if _, err := bolt.CompactFile(path, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + ".compact"); !os.IsNotExist(err) {
		t.Fatalf("the partial file is still there: %v", err)
	}
	wantStoreWhole(t, path)

	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("someone's file"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, path+".compact"); err != nil {
		t.Fatal(err)
	}
	if _, err := bolt.CompactFile(path, time.Second); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(victim); string(got) != "someone's file" {
		t.Fatal("compaction wrote through a symlink at its temporary name")
	}
	wantStoreWhole(t, path)
}
