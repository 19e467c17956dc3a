package kv_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/kv/kvtest"
)

// hammer calls read from a few goroutines until the returned stop is called,
// so cached reads race with whatever the test writes meanwhile.
func hammer(read func()) (stop func()) {
	var done atomic.Bool
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for !done.Load() {
				read()
			}
		})
	}
	return func() { done.Store(true); wg.Wait() }
}

func TestAuthenticateRefusesAClosedSessionAtOnce(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	for n := 1; n <= 20; n++ {
		a := mustAccount(t, s, c, n)
		token := "at-" + a.ID[len("acct-"):]
		if _, err := s.Authenticate(token); err != nil {
			t.Fatal(err)
		}
		stop := hammer(func() { s.Authenticate(token) })
		err := s.Logout(token)
		// From the moment the close has committed, no read may pass, however
		// the concurrent reads filled the cache around it.
		_, authErr := s.Authenticate(token)
		stop()
		if err != nil {
			t.Fatal(err)
		}
		if fault.ErrorCode(authErr) != fault.ECodeUnauthenticated {
			t.Fatalf("round %d: a closed session's token: got %v, want %s", n, authErr, fault.ECodeUnauthenticated)
		}
	}
}

func TestAuthenticateCopiesTheSession(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	mustAccount(t, s, c, 1)
	first, err := s.Authenticate("at-1")
	if err != nil {
		t.Fatal(err)
	}
	first.AccountID = "changed by a caller"
	second, err := s.Authenticate("at-1")
	if err != nil {
		t.Fatal(err)
	}
	if second.AccountID != "acct-1" {
		t.Errorf("AccountID = %q: a caller's change reached the next caller", second.AccountID)
	}
}

func TestShareBlobRefusesARevokedLinkAtOnce(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	holdVia(t, s, "acct", "album", kv.Blob{Hash: hexHash('a'), Size: 1})
	for _, id := range []string{"0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"} {
		if err := s.CreateShare(id, &kv.Share{AccountID: "acct", MetadataHash: hexHash('a'), Serves: []string{hexHash('a')},
			ExpiresAt: c.Now().Add(time.Hour)}, kv.ShareLimits{}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ShareBlob(id, hexHash('a')); err != nil {
			t.Fatal(err)
		}
		stop := hammer(func() { s.ShareBlob(id, hexHash('a')) })
		err := s.RevokeShare("acct", id)
		_, readErr := s.ShareBlob(id, hexHash('a'))
		stop()
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(readErr, kv.ErrShareNotFound) {
			t.Fatalf("a revoked link: got %v, want ErrShareNotFound", readErr)
		}
	}
}

func TestShareBlobExpiresWithoutAWrite(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	holdVia(t, s, "acct", "album", kv.Blob{Hash: hexHash('a'), Size: 1})
	const id = "0123456789abcdef0123456789abcdef"
	if err := s.CreateShare(id, &kv.Share{AccountID: "acct", MetadataHash: hexHash('a'), Serves: []string{hexHash('a')},
		ExpiresAt: c.Now().Add(time.Hour)}, kv.ShareLimits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ShareBlob(id, hexHash('a')); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Hour) // nothing is written: only the clock moves
	if _, err := s.ShareBlob(id, hexHash('a')); !errors.Is(err, kv.ErrShareNotFound) {
		t.Fatalf("an expired link: got %v, want ErrShareNotFound", err)
	}
}

// TestNodesSeeEachOthersRevocations: two Stores on one PostgreSQL schema are
// two nodes. A session closed and a link revoked through one are refused
// by the other at once, though the other has just read both.
func TestNodesSeeEachOthersRevocations(t *testing.T) {
	a, b, c := twoNodes(t)
	mustAccount(t, a, c, 1)
	holdVia(t, a, "acct-1", "album", kv.Blob{Hash: hexHash('a'), Size: 1})
	const id = "0123456789abcdef0123456789abcdef"
	if err := a.CreateShare(id, &kv.Share{AccountID: "acct-1", MetadataHash: hexHash('a'), Serves: []string{hexHash('a')}}, kv.ShareLimits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Authenticate("at-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ShareBlob(id, hexHash('a')); err != nil {
		t.Fatal(err)
	}
	if err := a.Logout("at-1"); err != nil {
		t.Fatal(err)
	}
	if err := a.RevokeShare("acct-1", id); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Authenticate("at-1"); fault.ErrorCode(err) != fault.ECodeUnauthenticated {
		t.Errorf("the other node: a closed session's token got %v, want %s", err, fault.ECodeUnauthenticated)
	}
	if _, err := b.ShareBlob(id, hexHash('a')); !errors.Is(err, kv.ErrShareNotFound) {
		t.Errorf("the other node: a revoked link got %v, want ErrShareNotFound", err)
	}
}
