package server

import (
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"
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
		srv.newRefreshToken([16]byte{1}),
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
