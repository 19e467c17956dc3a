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

// TestNewFallback: a fallback code is FallbackDigits decimal digits, handed
// out with its lookup form; a draw the modulo would favour (at or above the
// largest multiple of 10^12 below 2^64) is drawn again rather than folded.
func TestNewFallback(t *testing.T) {
	key := bytes.Repeat([]byte{1}, 32)
	var draws bytes.Buffer
	draws.Write(bytes.Repeat([]byte{0xff}, 8))                                 // 2^64-1: above the ceiling
	draws.Write([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff - 0x0f}) // still above
	draws.Write([]byte{0, 0, 0, 0, 0, 0, 0, 42})
	k, _ := secrets.New(key, &draws)
	digits, lookup := k.NewFallback()
	if digits != "000000000042" || lookup != k.FallbackLookup(digits) {
		t.Fatalf("got %q %q, want 000000000042 and its lookup", digits, lookup)
	}

	// Every position holds each digit about as often as any other: 2,400
	// codes put about 240 of each digit at each position (a standard
	// deviation of 15); a bound of 120 either way fails only for a skew.
	k, _ = secrets.New(key, rand.Reader)
	const codes = 2400
	var counts [secrets.FallbackDigits][10]int
	seen := map[string]bool{}
	for range codes {
		digits, _ := k.NewFallback()
		if len(digits) != secrets.FallbackDigits || seen[digits] {
			t.Fatalf("code %q: want %d digits, never repeated", digits, secrets.FallbackDigits)
		}
		seen[digits] = true
		for i, c := range []byte(digits) {
			if c < '0' || c > '9' {
				t.Fatalf("code %q holds a non-digit", digits)
			}
			counts[i][c-'0']++
		}
	}
	for i, pos := range counts {
		for d, n := range pos {
			if n < codes/10-120 || n > codes/10+120 {
				t.Errorf("position %d holds digit %d %d times in %d codes, want about %d", i, d, n, codes, codes/10)
			}
		}
	}
}
