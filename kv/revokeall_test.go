package kv_test

import (
	"bytes"
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/kv/kvtest"
)

// TestRevokeChallenge: a challenge is spent by its first use, whatever the
// outcome; an expired one is refused and spent too; it names the account and
// its pinned key (none before a directory).
func TestRevokeChallenge(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	a := mustAccount(t, s, c, 1)
	if err := s.PutRevokeChallenge(a.ID, "sbx_ch_one", c.Now().Add(5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	id, key, err := s.BurnRevokeChallenge("sbx_ch_one")
	if err != nil || id != a.ID || key != nil {
		t.Fatalf("burn before a directory: %q %v %v", id, key, err)
	}
	if _, _, err := s.BurnRevokeChallenge("sbx_ch_one"); fault.ErrorCode(err) != fault.ECodeChallengeExpired {
		t.Fatalf("a second use: %v", err)
	}
	if _, _, err := s.BurnRevokeChallenge("sbx_ch_never"); fault.ErrorCode(err) != fault.ECodeChallengeExpired {
		t.Fatalf("an unknown challenge: %v", err)
	}

	if err := s.PublishDirectory(a.ID, &kv.Directory{Version: 1, Bytes: []byte("d"), IdentityKey: []byte("pinned")}, kv.PublishLimit{}); err != nil {
		t.Fatal(err)
	}
	s.PutRevokeChallenge(a.ID, "sbx_ch_two", c.Now().Add(5*time.Minute))
	if _, key, err := s.BurnRevokeChallenge("sbx_ch_two"); err != nil || !bytes.Equal(key, []byte("pinned")) {
		t.Fatalf("burn after a directory: %q %v", key, err)
	}

	s.PutRevokeChallenge(a.ID, "sbx_ch_late", c.Now().Add(5*time.Minute))
	c.Advance(5 * time.Minute)
	if _, _, err := s.BurnRevokeChallenge("sbx_ch_late"); fault.ErrorCode(err) != fault.ECodeChallengeExpired {
		t.Fatalf("an expired challenge: %v", err)
	}
}
