package kv

import (
	"path/filepath"
	"testing"
	"time"

	"sealbox/kv/fault"
)

// A burned challenge is kept until it would have expired (so it answers
// 429, not 401), and the sweep then removes it with its index entry.
func TestMFAChallengeSweptAtExpiry(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	store, err := openFile(filepath.Join(t.TempDir(), "sealbox.db"), Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	acct := &Account{ID: "0b5f2a9e-7c1d-4e8a-b3f6-9d2c4e6a8b10", Email: "alice@example.com", CreatedAt: now, Factors: []Factor{{Kind: FactorTOTP, Sealed: []byte("sealed"), Confirmed: true}}}
	if err := store.CreateAccount(acct, &Session{ID: "0b5f2a9e-7c1d-4e8a-b3f6-9d2c4e6a8b11", AccountID: acct.ID, CreatedAt: now, RefreshExpiresAt: now.Add(time.Hour)}, "a", "r"); err != nil {
		t.Fatal(err)
	}
	if err := store.CreateMFAChallenge("sbx_mfa_x", acct.ID, now.Add(5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	wrong := func(string, []byte, time.Time) (uint64, bool, error) { return 0, false, nil }
	verify := func() error {
		return store.VerifyLogin("sbx_mfa_x", TOTPProof(wrong), 1, &Session{ID: "s"}, "a2", "r2")
	}
	if code := fault.ErrorCode(verify()); code != fault.ECodeInvalidCode {
		t.Fatalf("first wrong code: got %s, want %s", code, fault.ECodeInvalidCode)
	}
	if code := fault.ErrorCode(verify()); code != fault.ECodeRateLimited {
		t.Fatalf("after the limit: got %s, want %s", code, fault.ECodeRateLimited)
	}
	if _, err := store.Sweep(); err != nil {
		t.Fatal(err)
	}
	if n := countKeys(t, store, bucketMFAChallenges); n != 1 {
		t.Fatalf("challenges before expiry: got %d, want the burned one kept", n)
	}
	now = now.Add(5 * time.Minute)
	if _, err := store.Sweep(); err != nil {
		t.Fatal(err)
	}
	if n := countKeys(t, store, bucketMFAChallenges); n != 0 {
		t.Fatalf("challenges after expiry and sweep: got %d, want 0", n)
	}
	if code := fault.ErrorCode(verify()); code != fault.ECodeChallengeExpired {
		t.Fatalf("after the sweep: got %s, want %s", code, fault.ECodeChallengeExpired)
	}
}
