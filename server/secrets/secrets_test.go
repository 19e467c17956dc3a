package secrets_test

import (
	"bytes"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"sealbox/server/secrets"
)

func TestSealedSecret(t *testing.T) {
	key := make([]byte, 32)
	rand.Read(key)
	k, err := secrets.New(key, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	secret := []byte("twenty bytes secret!")
	sealed, err := k.SealTOTP("account-a", secret)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, secret) {
		t.Fatal("the sealed form holds the secret")
	}
	got, err := k.OpenTOTP("account-a", sealed)
	if err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("open: got %q, %v; want the secret", got, err)
	}
	if _, err := k.OpenTOTP("account-b", sealed); err == nil {
		t.Fatal("a secret sealed for one account opened for another")
	}
	other, _ := secrets.New(make([]byte, 32), rand.Reader)
	if _, err := other.OpenTOTP("account-a", sealed); err == nil {
		t.Fatal("a secret opened under another key")
	}
	for _, n := range []int{0, 16, 31, 33} {
		if _, err := secrets.New(make([]byte, n), rand.Reader); err == nil {
			t.Fatalf("a key of %d bytes was accepted", n)
		}
	}
	if _, err := k.OpenTOTP("account-a", sealed[:5]); err == nil {
		t.Fatal("a truncated sealed secret opened")
	}
}

// RFC 6238 appendix B's SHA-1 vectors (eight digits there; six here are
// the same values' last six digits) pin MatchTOTP to the standard, and the
// step it reports is the one whose code matched.
func TestMatchTOTP(t *testing.T) {
	secret := []byte("12345678901234567890")
	tests := []struct {
		unix int64
		code string
	}{
		{59, "287082"},
		{1111111109, "081804"},
		{1234567890, "005924"},
		{2000000000, "279037"},
	}
	for _, tt := range tests {
		now := time.Unix(tt.unix, 0)
		want := uint64(tt.unix) / secrets.TOTPPeriod
		for _, d := range []int64{-1, 0, 1} {
			// The code of step want is accepted within one step of skew.
			at := now.Add(time.Duration(d) * secrets.TOTPPeriod * time.Second)
			step, ok, err := secrets.MatchTOTP(secret, tt.code, at)
			if err != nil || !ok || step != want {
				t.Fatalf("at %d%+d steps: got step %d, %v, %v; want %d", tt.unix, d, step, ok, err, want)
			}
		}
		if _, ok, _ := secrets.MatchTOTP(secret, tt.code, now.Add(2*secrets.TOTPPeriod*time.Second)); ok {
			t.Fatalf("code of %d accepted two steps later", tt.unix)
		}
	}
}

// TestFallbackLookup: the lookup form is keyed (another key gives another
// form), fixed for one key, and holds no digit of the code.
func TestFallbackLookup(t *testing.T) {
	k1, _ := secrets.New(bytes.Repeat([]byte{1}, 32), rand.Reader)
	k2, _ := secrets.New(bytes.Repeat([]byte{2}, 32), rand.Reader)
	a, b := k1.FallbackLookup("048213776590"), k1.FallbackLookup("048213776590")
	if a != b || len(a) != 64 || a == k2.FallbackLookup("048213776590") || a == k1.FallbackLookup("048213776591") {
		t.Fatalf("lookups: %s %s", a, b)
	}
	if strings.Contains(a, "048213776590") {
		t.Fatal("the lookup form holds the code")
	}
}
