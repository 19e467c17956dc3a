package kv_test

import (
	"errors"
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/kvtest"
)

func TestEnrollmentFallbackCollisionRefused(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	exp := c.Now().Add(10 * time.Minute)
	if err := s.IssueEnrollmentCode("a", "sbx_en_first", "123456789012", exp); err != nil {
		t.Fatal(err)
	}
	// A live code's fallback is never re-pointed at another account's code.
	if err := s.IssueEnrollmentCode("b", "sbx_en_second", "123456789012", exp); !errors.Is(err, kv.ErrFallbackTaken) {
		t.Fatalf("got %v, want ErrFallbackTaken", err)
	}
	if _, err := s.RedeemEnrollmentCode("123456789012", true, func([]byte) string { return "sbx_rl_1" }, exp, kv.RelayLimits{}); err != nil {
		t.Fatalf("the first code's fallback: %v", err)
	}
	if err := s.CloseChannel("a", "sbx_rl_1"); err != nil {
		t.Fatalf("the channel is not the first account's: %v", err)
	}
	// Once the holder has expired, the fallback may be reused, and sweeping
	// the stale code leaves the new code's fallback in place.
	if err := s.IssueEnrollmentCode("a", "sbx_en_third", "000000000001", c.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Minute)
	if err := s.IssueEnrollmentCode("b", "sbx_en_fourth", "000000000001", c.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sweep(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RedeemEnrollmentCode("000000000001", true, func([]byte) string { return "sbx_rl_2" }, c.Now().Add(time.Minute), kv.RelayLimits{}); err != nil {
		t.Fatalf("the new code's fallback after the sweep: %v", err)
	}
	if err := s.CloseChannel("b", "sbx_rl_2"); err != nil {
		t.Fatalf("the channel is not the second account's: %v", err)
	}
}

func TestRelaySecretsAreStoredOnlyAsHashes(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	exp := c.Now().Add(10 * time.Minute)
	code, fallback, channel, challenge := "sbx_en_SECRETCODE0123456789", "987654321098", "sbx_rl_SECRETCHANNEL0123456789", "sbx_ch_SECRETCHALLENGE0123456789"
	if err := s.IssueEnrollmentCode("a", code, fallback, exp); err != nil {
		t.Fatal(err)
	}
	if err := s.IssueEnrollmentCode("a", "sbx_en_other", "111111111111", exp); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RedeemEnrollmentCode("sbx_en_other", false, func([]byte) string { return channel }, exp, kv.RelayLimits{}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutRevokeChallenge("a", challenge, exp); err != nil {
		t.Fatal(err)
	}
	path := s.Path()
	s.Close()
	assertFileLacks(t, path, code, fallback, channel, challenge)
}

func TestSweepRemovesExpiredChannelsWithTheirMailboxes(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	if err := s.IssueEnrollmentCode("a", "sbx_en_1", "222222222222", c.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RedeemEnrollmentCode("sbx_en_1", false, func([]byte) string { return "sbx_rl_1" }, c.Now().Add(15*time.Minute), kv.RelayLimits{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := s.AppendRelay("sbx_rl_1", kv.ToEnrollee, []byte("payload"), kv.RelayLimits{MailboxCapacity: 64}); err != nil {
			t.Fatal(err)
		}
	}
	c.Advance(15 * time.Minute)
	n, err := s.Sweep()
	if err != nil || n != 1 {
		t.Fatalf("sweep: %d entries, %v; want the channel's one", n, err)
	}
	// Even with its expiry ignored, nothing of the channel is left: a new
	// channel under the same handle starts empty.
	if err := s.IssueEnrollmentCode("a", "sbx_en_2", "333333333333", c.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RedeemEnrollmentCode("sbx_en_2", false, func([]byte) string { return "sbx_rl_1" }, c.Now().Add(15*time.Minute), kv.RelayLimits{}); err != nil {
		t.Fatal(err)
	}
	got, err := s.DrainRelay("sbx_rl_1", kv.ToEnrollee)
	if err != nil || len(got) != 0 {
		t.Fatalf("drain after the sweep: %q, %v", got, err)
	}
}
