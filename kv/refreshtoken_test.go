package kv_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"sealbox/kv"
)

// FuzzRefreshChain: a presented refresh token is untrusted input. Whatever
// RefreshChain accepts is exactly a token RefreshToken spells (the prefix
// and the canonical encoding of a chain id and a secret), and the chain it
// returns is that token's.
func FuzzRefreshChain(f *testing.F) {
	fuzzTokenSpelling(f, "sbx_rt_", []string{
		kv.RefreshToken([16]byte{1, 2, 3}, [32]byte{4, 5, 6}),
		"sbx_rt_" + strings.Repeat("A", 43), // a token minted before chains
		"sbx_rt_" + strings.Repeat("A", 64),
		"sbx_rt_" + strings.Repeat("A", 63) + "B", // spare bits set: not canonical
		"sbx_rt_" + strings.Repeat("A", 32) + "\n\n" + strings.Repeat("A", 30),
		"sbx_rt_" + strings.Repeat("/", 64),
		"sbx_at_" + strings.Repeat("A", 64),
		"",
	}, kv.RefreshChain, kv.RefreshToken)
}

// fuzzTokenSpelling fuzzes parse, the reader of the id a token of prefix
// carries beside its 32-byte secret: whatever it accepts must be exactly
// the token spell writes for the id it returns (the prefix, then the id and
// the secret in canonical base64url), so no two spellings name one id and
// nothing else is read as one.
func fuzzTokenSpelling[ID any](f *testing.F, prefix string, seeds []string, parse func(string) (ID, bool), spell func(ID, [32]byte) string) {
	for _, seed := range seeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, ok := parse(s)
		if !ok {
			return
		}
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(s, prefix))
		if err != nil || len(raw) != 48 || !strings.HasPrefix(s, prefix) {
			t.Fatalf("accepted %q, which cannot be spelled so", s)
		}
		var secret [32]byte
		copy(secret[:], raw[16:])
		if spell(id, secret) != s {
			t.Fatalf("accepted %q, which is not the canonical spelling of its id %v", s, id)
		}
	})
}
