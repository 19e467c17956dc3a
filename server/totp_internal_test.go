package server

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

func FuzzTOTPCode(f *testing.F) {
	for _, seed := range []string{"123456", "000000", "12345", "1234567", "12a456", " 12345", "123 456", "١٢٣٤٥٦", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ok := isTOTPCode(s)
		want := len(s) == 6 && strings.Trim(s, "0123456789") == ""
		if ok != want {
			t.Fatalf("isTOTPCode(%q) = %v, want %v", s, ok, want)
		}
	})
}

func FuzzMFAToken(f *testing.F) {
	srv := &Server{cfg: Config{Rand: rand.Reader}}
	for _, seed := range []string{
		srv.newToken(prefixMFA),
		srv.newToken(prefixRefresh),
		"sbx_mfa_",
		"sbx_mfa_" + strings.Repeat("A", 43),
		"sbx_mfa_" + strings.Repeat("A", 42) + "B", // spare bits set: not canonical
		"sbx_mfa_" + strings.Repeat("/", 43),
		"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !isMFAToken(s) {
			return
		}
		// Whatever is accepted is exactly what newToken can mint: the prefix
		// and the canonical encoding of 32 bytes.
		rest, found := strings.CutPrefix(s, prefixMFA)
		if !found {
			t.Fatalf("accepted %q without the prefix", s)
		}
		raw, err := base64.RawURLEncoding.DecodeString(rest)
		if err != nil || len(raw) != 32 || base64.RawURLEncoding.EncodeToString(raw) != rest {
			t.Fatalf("accepted %q, which newToken cannot mint", s)
		}
	})
}

func TestNewMFATokenIsAccepted(t *testing.T) {
	srv := &Server{cfg: Config{Rand: rand.Reader}}
	for i := 0; i < 100; i++ {
		if tok := srv.newToken(prefixMFA); !isMFAToken(tok) {
			t.Fatalf("isMFAToken refused a minted token %q", tok)
		}
	}
}

func TestSealedSecret(t *testing.T) {
	key := make([]byte, 32)
	rand.Read(key)
	srv := &Server{cfg: Config{Rand: rand.Reader, SealKey: key}}
	secret := []byte("twenty bytes secret!")
	sealed, err := srv.sealSecret("account-a", secret)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, secret) {
		t.Fatal("the sealed form holds the secret")
	}
	got, err := srv.openSecret("account-a", sealed)
	if err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("open: got %q, %v; want the secret", got, err)
	}
	if _, err := srv.openSecret("account-b", sealed); err == nil {
		t.Fatal("a secret sealed for one account opened for another")
	}
	other := &Server{cfg: Config{Rand: rand.Reader, SealKey: make([]byte, 32)}}
	if _, err := other.openSecret("account-a", sealed); err == nil {
		t.Fatal("a secret opened under another key")
	}
	noKey := &Server{cfg: Config{Rand: rand.Reader}}
	if _, err := noKey.sealSecret("account-a", secret); err == nil {
		t.Fatal("sealed without a 32-byte key")
	}
	if _, err := srv.openSecret("account-a", sealed[:5]); err == nil {
		t.Fatal("a truncated sealed secret opened")
	}
}

// RFC 6238 appendix B's SHA-1 vectors (eight digits there; six here are
// the same values' last six digits) pin matchTOTP to the standard, and the
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
		want := uint64(tt.unix) / totpPeriod
		for _, d := range []int64{-1, 0, 1} {
			// The code of step want is accepted within one step of skew.
			at := now.Add(time.Duration(d) * totpPeriod * time.Second)
			step, ok, err := matchTOTP(secret, tt.code, at)
			if err != nil || !ok || step != want {
				t.Fatalf("at %d%+d steps: got step %d, %v, %v; want %d", tt.unix, d, step, ok, err, want)
			}
		}
		if _, ok, _ := matchTOTP(secret, tt.code, now.Add(2*totpPeriod*time.Second)); ok {
			t.Fatalf("code of %d accepted two steps later", tt.unix)
		}
	}
}
