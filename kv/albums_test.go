package kv_test

import (
	"testing"
	"time"

	"sealbox/kv/fault"
	"sealbox/kv/kvtest"
)

func TestProvisionAlbum(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	a, created, err := s.ProvisionAlbum("acct", "album", "2026-01-01")
	if err != nil || !created || a.OwnerID != "acct" || a.ProtocolVersion != "2026-01-01" || !a.CreatedAt.Equal(c.Now()) {
		t.Fatalf("create: %+v, %v, %v", a, created, err)
	}
	c.Advance(time.Hour)
	// Idempotent: the stored album, pinned as it was, nothing rewritten.
	a, created, err = s.ProvisionAlbum("acct", "album", "2026-09-01")
	if err != nil || created || a.ProtocolVersion != "2026-01-01" || !a.CreatedAt.Equal(c.Now().Add(-time.Hour)) {
		t.Fatalf("repeat: %+v, %v, %v", a, created, err)
	}
	if _, _, err := s.ProvisionAlbum("other", "album", "2026-09-01"); fault.ErrorCode(err) != fault.ECodeAlbumForbidden {
		t.Fatalf("another account: %v", err)
	}
	if list, _ := s.Albums("other"); len(list) != 0 {
		t.Fatalf("a refused provision listed: %+v", list)
	}
}

// TestAlbumsOldestFirst: an account lists its own albums, oldest first.
func TestAlbumsOldestFirst(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	const first, second = "0f0e0d0c-0b0a-4908-8706-050403020100", "00000000-0b0a-4908-8706-050403020100"
	s.ProvisionAlbum("acct-a", first, "2026-09-01")
	c.Advance(time.Second)
	s.ProvisionAlbum("acct-a", second, "2026-09-01")
	s.ProvisionAlbum("acct-b", "11111111-0b0a-4908-8706-050403020100", "2026-09-01")
	list, err := s.Albums("acct-a")
	if err != nil || len(list) != 2 || list[0].ID != first || list[1].ID != second {
		t.Fatalf("list: %+v %v", list, err)
	}
}
