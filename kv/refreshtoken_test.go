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
	for _, seed := range []string{
		kv.RefreshToken([16]byte{1, 2, 3}, [32]byte{4, 5, 6}),
		"sbx_rt_" + strings.Repeat("A", 43), // a token minted before chains
		"sbx_rt_" + strings.Repeat("A", 64),
		"sbx_rt_" + strings.Repeat("A", 63) + "B", // spare bits set: not canonical
		"sbx_rt_" + strings.Repeat("A", 32) + "\n\n" + strings.Repeat("A", 30),
		"sbx_rt_" + strings.Repeat("/", 64),
		"sbx_at_" + strings.Repeat("A", 64),
		"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		chain, ok := kv.RefreshChain(s)
		if !ok {
			return
		}
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(s, "sbx_rt_"))
		if err != nil || len(raw) != 48 || !strings.HasPrefix(s, "sbx_rt_") {
			t.Fatalf("accepted %q, which RefreshToken cannot spell", s)
		}
		var secret [32]byte
		copy(secret[:], raw[16:])
		if kv.RefreshToken(chain, secret) != s {
			t.Fatalf("accepted %q, which is not the canonical spelling of its chain %x", s, chain)
		}
	})
}
