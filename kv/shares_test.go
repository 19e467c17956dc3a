package kv_test

import (
	"errors"
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/kv/kvtest"
)

func TestShareStoredUnderTheHashOfItsID(t *testing.T) {
	s, _ := kvtest.MustOpenStore(t)
	holdVia(t, s, "acct", "album", kv.Blob{Hash: hexHash('a'), Size: 1})
	const id = "0123456789abcdef0123456789abcdef"
	if err := s.CreateShare(id, &kv.Share{AccountID: "acct", MetadataHash: hexHash('a'), Serves: []string{hexHash('a')}}, kv.ShareLimits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ShareBlob(id, hexHash('a')); err != nil {
		t.Fatal(err)
	}
	path := s.Path()
	s.Close()
	// The opaque id is the capability: a copy of the file must not hold it.
	assertFileLacks(t, path, id)
}

func TestShareLifecycleInStore(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	holdVia(t, s, "acct", "album", kv.Blob{Hash: hexHash('a'), Size: 1})
	holdVia(t, s, "acct", "album", kv.Blob{Hash: hexHash('b'), Size: 2})
	const id = "fedcba9876543210fedcba9876543210"
	sh := &kv.Share{AccountID: "acct", MetadataHash: hexHash('a'), Serves: []string{hexHash('b'), hexHash('a')}, ExpiresAt: c.Now().Add(time.Hour)}
	if err := s.CreateShare(id, sh, kv.ShareLimits{}); err != nil {
		t.Fatal(err)
	}
	if b, err := s.ShareBlob(id, hexHash('b')); err != nil || b.Size != 2 || !b.StoredAt.Equal(c.Now()) {
		t.Fatalf("blob of the link: %+v, %v", b, err)
	}
	if _, err := s.ShareBlob(id, hexHash('c')); !errors.Is(err, kv.ErrShareNotFound) {
		t.Fatalf("a blob the link does not name: %v", err)
	}
	c.Advance(time.Hour)
	if _, err := s.Share(id); !errors.Is(err, kv.ErrShareNotFound) {
		t.Fatalf("expired: %v", err)
	}
	if _, err := s.Sweep(); err != nil {
		t.Fatal(err)
	}
	// Once expired, the id is free again, for any account.
	holdVia(t, s, "other", "album-2", kv.Blob{Hash: hexHash('a'), Size: 1})
	if err := s.CreateShare(id, &kv.Share{AccountID: "other", MetadataHash: hexHash('a'), Serves: []string{hexHash('a')}}, kv.ShareLimits{}); err != nil {
		t.Fatalf("reuse after expiry: %v", err)
	}
	if _, err := s.ShareBlob(id, hexHash('b')); !errors.Is(err, kv.ErrShareNotFound) {
		t.Fatalf("the expired link's serves outlived it: %v", err)
	}
}

// TestShareSweepRevokedAndExpired: the sweep deletes an expired link at its
// expiry and a revoked one 30 days after its revocation (or at its expiry,
// when that comes first). A revoked link that has not expired leaves a
// tombstone, which keeps its id refused, for its owner's retry and for
// anyone else, and serves nothing; the tombstone of a link with an expiry
// goes at that expiry, and the id is free again, without the old link's
// blobs.
func TestShareSweepRevokedAndExpired(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	holdVia(t, s, "acct", "album", kv.Blob{Hash: hexHash('a'), Size: 1})
	holdVia(t, s, "acct", "album", kv.Blob{Hash: hexHash('b'), Size: 2})
	holdVia(t, s, "other", "album-2", kv.Blob{Hash: hexHash('a'), Size: 1})
	day, start := 24*time.Hour, c.Now()
	link := func(expiresIn time.Duration) *kv.Share {
		sh := &kv.Share{AccountID: "acct", MetadataHash: hexHash('a'), Serves: []string{hexHash('a'), hexHash('b')}}
		if expiresIn > 0 {
			sh.ExpiresAt = start.Add(expiresIn)
		}
		return sh
	}
	const forever, late, soon, expiring = "00000000000000000000000000000001", "00000000000000000000000000000002", "00000000000000000000000000000003", "00000000000000000000000000000004"
	bodies := map[string]*kv.Share{forever: link(0), late: link(60 * day), soon: link(10 * day), expiring: link(time.Hour)}
	for id, sh := range bodies {
		if err := s.CreateShare(id, sh, kv.ShareLimits{}); err != nil {
			t.Fatal(err)
		}
		if id != expiring {
			if err := s.RevokeShare("acct", id); err != nil {
				t.Fatal(err)
			}
		}
	}
	sweepAt := func(at time.Time) {
		t.Helper()
		c.Advance(at.Sub(c.Now()))
		if _, err := s.Sweep(); err != nil {
			t.Fatal(err)
		}
	}
	want := func(id string, record, tombstone bool) {
		t.Helper()
		if r, tomb := kv.ShareKeysForTests(t, s, id); r != record || tomb != tombstone {
			t.Fatalf("link %s: record %v, tombstone %v; want %v, %v", id, r, tomb, record, tombstone)
		}
	}
	taken := func(id, account string) {
		t.Helper()
		sh := *bodies[id]
		sh.AccountID, sh.ExpiresAt = account, time.Time{}
		if err := s.CreateShare(id, &sh, kv.ShareLimits{}); fault.ErrorCode(err) != fault.ECodeShareIDTaken {
			t.Fatalf("registering link %s again as %s: %v, want error.share.id_taken", id, account, err)
		}
		if _, err := s.ShareBlob(id, hexHash('b')); !errors.Is(err, kv.ErrShareNotFound) {
			t.Fatalf("link %s serves again: %v", id, err)
		}
	}
	free := func(id string) {
		t.Helper()
		if err := s.CreateShare(id, &kv.Share{AccountID: "other", MetadataHash: hexHash('a'), Serves: []string{hexHash('a')}}, kv.ShareLimits{}); err != nil {
			t.Fatalf("registering link %s anew: %v", id, err)
		}
		if _, err := s.ShareBlob(id, hexHash('b')); !errors.Is(err, kv.ErrShareNotFound) {
			t.Fatalf("the old link %s's blobs came back: %v", id, err)
		}
	}
	sweepAt(start.Add(time.Hour))
	want(expiring, false, false)
	free(expiring)
	sweepAt(start.Add(10 * day))
	want(soon, false, false)
	sweepAt(start.Add(30*day - time.Second))
	want(forever, true, false)
	want(late, true, false)
	sweepAt(start.Add(30 * day))
	want(forever, false, true)
	want(late, false, true)
	taken(forever, "acct")
	taken(late, "other")
	free(soon)
	sweepAt(start.Add(60 * day))
	want(late, false, false)
	want(forever, false, true)
	taken(forever, "other")
	free(late)
}

// TestShareCaps: an account's link records are bounded (ShareLimits). A new
// link past the cap of links, or past the blobs its live links serve
// together, is error.limit.shares naming the cap, with the wait until a
// counted link frees its place. A revoked link frees its serves at once and
// its place when the sweep replaces its record by a tombstone; an expired
// link frees both when the sweep deletes it, and until then the wait is the
// sweep's. A retry of a registered link is no new link, and another account
// has caps of its own.
func TestShareCaps(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	for _, h := range []byte("abcd") {
		holdVia(t, s, "acct", "album", kv.Blob{Hash: hexHash(h), Size: 1})
	}
	holdVia(t, s, "other", "album-2", kv.Blob{Hash: hexHash('a'), Size: 1})
	lim := kv.ShareLimits{Links: 3, Serves: 3}
	start := c.Now()
	link := func(account string, expiresIn time.Duration, hashes ...byte) *kv.Share {
		sh := &kv.Share{AccountID: account, MetadataHash: hexHash(hashes[0])}
		for _, h := range hashes {
			sh.Serves = append(sh.Serves, hexHash(h))
		}
		if expiresIn > 0 {
			sh.ExpiresAt = start.Add(expiresIn)
		}
		return sh
	}
	create := func(id string, sh *kv.Share) {
		t.Helper()
		if err := s.CreateShare(id, sh, lim); err != nil {
			t.Fatalf("link %s: %v", id, err)
		}
	}
	const ab, c2h, d, a1, a2 = "000000000000000000000000000000ab", "00000000000000000000000000000c2b", "0000000000000000000000000000000d", "000000000000000000000000000000a1", "000000000000000000000000000000a2"
	create(ab, link("acct", 0, 'a', 'b'))
	create(c2h, link("acct", 2*time.Hour, 'c'))
	wantLimit(t, s.CreateShare(d, link("acct", 0, 'd'), lim), fault.ECodeLimitShares, kv.LimitShareServes, 2*time.Hour)
	create(ab, link("acct", 0, 'a', 'b'))
	create(d, link("other", 0, 'a'))
	if err := s.RevokeShare("acct", ab); err != nil {
		t.Fatal(err)
	}
	create(a1, link("acct", 0, 'a', 'd'))
	wantLimit(t, s.CreateShare(a2, link("acct", 0, 'a'), lim), fault.ECodeLimitShares, kv.LimitShareLinks, 2*time.Hour)
	c.Advance(2 * time.Hour)
	wantLimit(t, s.CreateShare(a2, link("acct", 0, 'b'), lim), fault.ECodeLimitShares, kv.LimitShareLinks, time.Minute)
	if _, err := s.Sweep(); err != nil {
		t.Fatal(err)
	}
	create(a2, link("acct", 0, 'b'))
	const a3 = "000000000000000000000000000000a3"
	wantLimit(t, s.CreateShare(a3, link("acct", 0, 'c'), lim), fault.ECodeLimitShares, kv.LimitShareLinks, 30*24*time.Hour-2*time.Hour)
	c.Advance(30*24*time.Hour - 2*time.Hour)
	if _, err := s.Sweep(); err != nil {
		t.Fatal(err)
	}
	// Waiting frees no serves now: no live link expires.
	wantLimit(t, s.CreateShare(a3, link("acct", 0, 'c'), lim), fault.ECodeLimitShares, kv.LimitShareServes, time.Hour)
	if err := s.RevokeShare("acct", a2); err != nil {
		t.Fatal(err)
	}
	create(a3, link("acct", 0, 'c'))
}
