package kv_test

import (
	"maps"
	"math"
	"strings"
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/kv/kvtest"
)

// holdVia stores b as held by accountID through a fresh upload session, the
// way the server does.
func holdVia(tb testing.TB, s *kv.Store, accountID, albumID string, b kv.Blob) bool {
	tb.Helper()
	ensureAccount(tb, s, accountID)
	if _, _, err := s.ProvisionAlbum(accountID, albumID, "2026-09-01"); err != nil {
		tb.Fatal(err)
	}
	token := "sbx_up_" + accountID + albumID + b.Hash
	if _, err := s.OpenUpload(accountID, albumID, token, time.Hour, 0); err != nil {
		tb.Fatal(err)
	}
	newlyHeld, err := s.AddUploadBlob(accountID, token, b, time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	return newlyHeld
}

// ensureAccount creates the account id unless it exists: holdings are
// charged to a real account.
func ensureAccount(tb testing.TB, s *kv.Store, id string) {
	tb.Helper()
	err := s.AddAccount(&kv.Account{ID: id, Email: id + "@example.org"})
	if err != nil && fault.ErrorCode(err) != fault.ECodeAccountExists {
		tb.Fatal(err)
	}
}

func hexHash(c byte) string { return strings.Repeat(string(c), 64) }

// TestBlobsRecorded: a page of hashes is checked in one call, held or not,
// an empty page included.
func TestBlobsRecorded(t *testing.T) {
	s, _ := kvtest.MustOpenStore(t)
	holdVia(t, s, "acct-1", "album-1", kv.Blob{Hash: hexHash('a'), Size: 1})
	holdVia(t, s, "acct-2", "album-2", kv.Blob{Hash: hexHash('c'), Size: 3})
	for _, tc := range []struct {
		hashes []string
		want   map[string]bool
	}{
		{nil, map[string]bool{}},
		{[]string{hexHash('a')}, map[string]bool{hexHash('a'): true}},
		{[]string{hexHash('b')}, map[string]bool{hexHash('b'): false}},
		{
			[]string{hexHash('a'), hexHash('b'), hexHash('c'), hexHash('d')},
			map[string]bool{hexHash('a'): true, hexHash('b'): false, hexHash('c'): true, hexHash('d'): false},
		},
	} {
		got, err := s.BlobsRecorded(tc.hashes)
		if err != nil || !maps.Equal(got, tc.want) {
			t.Errorf("BlobsRecorded(%d hashes) = %v, %v; want %v", len(tc.hashes), got, err, tc.want)
		}
	}
}

func TestHoldingsPerAccount(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	// "acct-1" is a prefix of "acct-10": their rows must not mix.
	holdVia(t, s, "acct-1", "album-1", kv.Blob{Hash: hexHash('a'), Size: 100})
	holdVia(t, s, "acct-1", "album-1", kv.Blob{Hash: hexHash('b'), Size: 20})
	c.Advance(time.Minute)
	if !holdVia(t, s, "acct-10", "album-10", kv.Blob{Hash: hexHash('a'), Size: 100}) {
		t.Fatal("a second account's first holding of a blob is not new")
	}
	if holdVia(t, s, "acct-10", "album-10", kv.Blob{Hash: hexHash('a'), Size: 100}) {
		t.Fatal("a repeated holding reported new")
	}
	for _, tc := range []struct {
		account string
		bytes   int64
	}{{"acct-1", 120}, {"acct-10", 100}, {"acct-2", 0}} {
		if got, err := s.HeldBytes(tc.account); err != nil || got != tc.bytes {
			t.Errorf("HeldBytes(%s): got %d, %v; want %d", tc.account, got, err, tc.bytes)
		}
	}
	if ok, _ := s.Holds("acct-10", hexHash('b')); ok {
		t.Fatal("acct-10 holds acct-1's blob")
	}
	if ok, _ := s.Holds("acct-1", hexHash('b')); !ok {
		t.Fatal("acct-1 does not hold its blob")
	}
	// One record per blob, stored_at from the first holding, paged in hash order.
	page, err := s.Blobs("", 1)
	if err != nil || len(page) != 1 || page[0].Hash != hexHash('a') || page[0].Size != 100 || !page[0].StoredAt.Equal(c.Now().Add(-time.Minute)) {
		t.Fatalf("first page: %+v, %v", page, err)
	}
	page, err = s.Blobs(page[0].Hash, 10)
	if err != nil || len(page) != 1 || page[0].Hash != hexHash('b') {
		t.Fatalf("second page: %+v, %v", page, err)
	}
	if page, _ = s.Blobs(hexHash('b'), 10); len(page) != 0 {
		t.Fatalf("past the end: %+v", page)
	}
}

func TestQuotaRefusesAndWritesNothing(t *testing.T) {
	s, _ := kvtest.MustOpenStore(t)
	holdVia(t, s, "acct", "album", kv.Blob{Hash: hexHash('a'), Size: 60})
	if room, err := s.QuotaRoom("acct", hexHash('b')); room != math.MaxInt64 || err != nil {
		t.Fatalf("an unlimited quota bounds nothing: got %d, %v", room, err)
	}
	if err := s.SetQuota("acct@example.org", 100); err != nil {
		t.Fatal(err)
	}
	if room, err := s.QuotaRoom("acct", hexHash('b')); room != 40 || err != nil {
		t.Fatalf("room for a new blob: got %d, %v; want 40", room, err)
	}
	if room, err := s.QuotaRoom("acct", hexHash('a')); room != math.MaxInt64 || err != nil {
		t.Fatalf("a blob already held costs nothing: got %d, %v", room, err)
	}
	token := "sbx_up_quota"
	if _, err := s.OpenUpload("acct", "album", token, time.Hour, 0); err != nil {
		t.Fatal(err)
	}
	_, err := s.AddUploadBlob("acct", token, kv.Blob{Hash: hexHash('b'), Size: 41}, time.Hour)
	if fault.ErrorCode(err) != fault.ECodeQuotaExceeded {
		t.Fatalf("got %v, want %s", err, fault.ECodeQuotaExceeded)
	}
	if held, _ := s.Holds("acct", hexHash('b')); held {
		t.Fatal("a refused holding was recorded")
	}
	if got, _ := s.HeldBytes("acct"); got != 60 {
		t.Fatalf("usage after a refusal: got %d, want 60", got)
	}
	if blobs, _ := s.Blobs("", 10); len(blobs) != 1 {
		t.Fatalf("a refused blob was recorded: %v", blobs)
	}
	if _, err := s.AddUploadBlob("acct", token, kv.Blob{Hash: hexHash('c'), Size: 40}, time.Hour); err != nil {
		t.Fatalf("exactly at the quota: %v", err)
	}
	if room, err := s.QuotaRoom("acct", hexHash('d')); room != 0 || err != nil {
		t.Fatalf("room at the quota: got %d, %v; want 0", room, err)
	}
}

// TestUsageProblems: usage kept by the store matches the holdings; a usage
// record that drifted from them is reported, naming the account and both
// figures.
func TestUsageProblems(t *testing.T) {
	s, _ := kvtest.MustOpenStore(t)
	holdVia(t, s, "acct-a", "album-a", kv.Blob{Hash: strings.Repeat("a", 64), Size: 100})
	holdVia(t, s, "acct-a", "album-a", kv.Blob{Hash: strings.Repeat("b", 64), Size: 20})
	holdVia(t, s, "acct-b", "album-b", kv.Blob{Hash: strings.Repeat("a", 64), Size: 100})
	if got, err := s.UsageProblems(10); err != nil || len(got) != 0 {
		t.Fatalf("a consistent store: %v, %v", got, err)
	}
	kv.SetUsageForTests(t, s, "acct-b", 7)
	got, err := s.UsageProblems(10)
	if err != nil || len(got) != 1 || got[0] != "account acct-b: usage records 7 bytes, its holdings add up to 100" {
		t.Fatalf("a drifted usage: %q, %v", got, err)
	}
}
