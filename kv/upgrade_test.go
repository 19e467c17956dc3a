package kv_test

import (
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/kv/kvtest"
)

// TestUpgradeCeremony: start, the same intent again, another intent refused,
// abort by the live intent only, commit refused while a session is in
// flight, commit re-pins the album, and a window that closes ends the
// ceremony.
func TestUpgradeCeremony(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	a := mustAccount(t, s, c, 1)
	const album = "0f0e0d0c-0b0a-4908-8706-050403020100"
	if _, _, err := s.ProvisionAlbum(a.ID, album, "2025-01-15"); err != nil {
		t.Fatal(err)
	}
	intent := func(id string) kv.Upgrade {
		return kv.Upgrade{IntentID: id, ToProtocolVersion: "2026-09-01", Intent: []byte("intent " + id)}
	}
	if _, err := s.StartUpgrade(a.ID, album, kv.Upgrade{IntentID: "x", ToProtocolVersion: "2025-01-15"}, 15*time.Minute); fault.ErrorCode(err) != fault.ECodeUpgradeBadTarget {
		t.Fatalf("a target not newer than the album's protocol: %v", err)
	}
	p, err := s.StartUpgrade(a.ID, album, intent("i1"), 15*time.Minute)
	if err != nil || p.Upgrade == nil || p.Upgrade.IntentID != "i1" || !p.Upgrade.ExpiresAt.Equal(c.Now().Add(15*time.Minute)) {
		t.Fatalf("start: %+v %v", p, err)
	}
	if p, err := s.StartUpgrade(a.ID, album, intent("i1"), 15*time.Minute); err != nil || p.Upgrade.IntentID != "i1" {
		t.Fatalf("the same intent again: %+v %v", p, err)
	}
	if _, err := s.StartUpgrade(a.ID, album, intent("i2"), 15*time.Minute); fault.ErrorCode(err) != fault.ECodeUpgradeInFlight {
		t.Fatalf("another intent while one is live: %v", err)
	}
	if _, err := s.AbortUpgrade(a.ID, album, "i2"); fault.ErrorCode(err) != fault.ECodeUpgradeInFlight {
		t.Fatalf("abort by another intent: %v", err)
	}
	if p, err := s.AbortUpgrade(a.ID, album, "i1"); err != nil || p.Upgrade != nil {
		t.Fatalf("abort: %+v %v", p, err)
	}

	if _, err := s.StartUpgrade(a.ID, album, intent("i3"), 15*time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.OpenUpload(a.ID, album, "sbx_up_ceremony", time.Hour, 0); fault.ErrorCode(err) != fault.ECodeUpgradeInFlight {
		t.Fatalf("an upload session during the ceremony: %v", err)
	}
	if p, err := s.CommitUpgrade(a.ID, album, "i3", []byte("tombstone")); err != nil || p.Upgrade != nil {
		t.Fatalf("commit: %+v %v", p, err)
	}
	albums, err := s.Albums(a.ID)
	if err != nil || len(albums) != 1 || albums[0].ProtocolVersion != "2026-09-01" {
		t.Fatalf("after commit: %+v %v", albums, err)
	}

	// Another album: a session in flight blocks the commit; the window
	// closing ends the ceremony.
	const second = "1f0e0d0c-0b0a-4908-8706-050403020100"
	s.ProvisionAlbum(a.ID, second, "2025-01-15")
	if _, err := s.OpenUpload(a.ID, second, "sbx_up_open", time.Hour, 0); err != nil {
		t.Fatal(err)
	}
	if p, err := s.StartUpgrade(a.ID, second, intent("i4"), 15*time.Minute); err != nil || p.InFlight != 1 {
		t.Fatalf("start with a session open: %+v %v", p, err)
	}
	if _, err := s.CommitUpgrade(a.ID, second, "i4", nil); fault.ErrorCode(err) != fault.ECodeUpgradeNotQuiescent {
		t.Fatalf("commit with a session in flight: %v", err)
	}
	c.Advance(16 * time.Minute)
	if p, err := s.UpgradePhase(a.ID, second); err != nil || p.Upgrade != nil {
		t.Fatalf("after the window: %+v %v", p, err)
	}
	if _, err := s.UpgradePhase("acct-other", second); fault.ErrorCode(err) != fault.ECodeAlbumNotFound {
		t.Fatalf("another account's album: %v", err)
	}
}
