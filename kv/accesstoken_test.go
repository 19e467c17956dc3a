package kv_test

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/kv/kvtest"
)

// FuzzAccessTokenAccount: a presented access token is untrusted input.
// Whatever AccessTokenAccount accepts is exactly a token AccessToken spells
// (the prefix and the canonical encoding of a UUID's bytes and a secret),
// and the account it returns is that token's.
func FuzzAccessTokenAccount(f *testing.F) {
	fuzzTokenSpelling(f, "sbx_at_", []string{
		kv.AccessToken("6f1c2b9e-3d4a-4e5f-8a7b-1c2d3e4f5a6b", [32]byte{4, 5, 6}),
		"sbx_at_" + strings.Repeat("A", 43), // a token minted before tokens named accounts
		"sbx_at_" + strings.Repeat("A", 64),
		"sbx_at_" + strings.Repeat("A", 63) + "B", // spare bits set: not canonical
		"sbx_at_" + strings.Repeat("A", 32) + "\n\n" + strings.Repeat("A", 30),
		"sbx_rt_" + strings.Repeat("A", 64),
		"",
	}, kv.AccessTokenAccount, kv.AccessToken)
}

// TestAccessTokenNamesItsAccount: a token of a UUID account names it and
// keeps 256 bits of secret; an id that is not a canonical UUID is left out,
// and so is a token of the shape minted before.
func TestAccessTokenNamesItsAccount(t *testing.T) {
	const id = "6f1c2b9e-3d4a-4e5f-8a7b-1c2d3e4f5a6b"
	token := kv.AccessToken(id, [32]byte{9})
	if got, ok := kv.AccessTokenAccount(token); !ok || got != id {
		t.Errorf("AccessTokenAccount(%q) = %q, %v; want %q", token, got, ok, id)
	}
	if len(token) != len("sbx_at_")+64 {
		t.Errorf("token %q: want the prefix and 64 characters (16 bytes of id, 32 of secret)", token)
	}
	for _, notNamed := range []string{
		kv.AccessToken("6F1C2B9E-3D4A-4E5F-8A7B-1C2D3E4F5A6B", [32]byte{9}), // not canonical: ids are lowercase
		kv.AccessToken("acct-1", [32]byte{9}),
		"sbx_at_" + base64.RawURLEncoding.EncodeToString(make([]byte, 32)),
	} {
		if got, ok := kv.AccessTokenAccount(notNamed); ok {
			t.Errorf("AccessTokenAccount(%q) = %q: want no account", notNamed, got)
		}
	}
	if token := kv.AccessToken("acct-1", [32]byte{9}); len(token) != len("sbx_at_")+43 {
		t.Errorf("a token naming no account is %q: want the prefix and 43 characters of secret", token)
	}
}

// TestAuthenticateAccount: the session and the account of an access token
// come back together whatever the token's shape, only for a live session,
// and always the session's own account; on PostgreSQL a token that names
// its account costs one round trip.
func TestAuthenticateAccount(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	register := func(id, email, access string) *kv.Account {
		t.Helper()
		a := &kv.Account{ID: id, Email: email, PasswordHash: "h", CreatedAt: c.Now()}
		if err := s.CreateAccount(a, newSession(c, id, "sess-"+id), access, "rt-"+id); err != nil {
			t.Fatal(err)
		}
		return a
	}
	const idA, idB = "0b5f2a9e-7c1d-4e8a-b3f6-00000000000a", "0b5f2a9e-7c1d-4e8a-b3f6-00000000000b"
	named := kv.AccessToken(idA, [32]byte{1})
	older := "sbx_at_" + base64.RawURLEncoding.EncodeToString(make([]byte, 32))
	register(idA, "a@example.org", named)
	register(idB, "b@example.org", older)
	// A token naming A whose session is C's: never minted so, but the
	// session decides whose account this is.
	const idC = "0b5f2a9e-7c1d-4e8a-b3f6-00000000000c"
	misnamed := kv.AccessToken(idA, [32]byte{2})
	register(idC, "c@example.org", misnamed)

	for _, tc := range []struct {
		name, token, account, email string
		trips                       uint64 // on an engine that reports them
	}{
		{"a token naming its account", named, idA, "a@example.org", 1},
		{"a token of the older shape", older, idB, "b@example.org", 2},
		{"a token naming another account than its session's", misnamed, idC, "c@example.org", 2},
	} {
		before, figures := s.EngineStats()
		sess, acct, err := s.AuthenticateAccount(tc.token)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if sess.AccountID != tc.account || acct.ID != tc.account || acct.Email != tc.email {
			t.Errorf("%s: session of %q, account %q (%s); want %q (%s)", tc.name, sess.AccountID, acct.ID, acct.Email, tc.account, tc.email)
		}
		if after, _ := s.EngineStats(); figures && after.RoundTrips-before.RoundTrips != tc.trips {
			t.Errorf("%s: %d round trips, want %d", tc.name, after.RoundTrips-before.RoundTrips, tc.trips)
		}
	}

	refused := func(what, token string) {
		t.Helper()
		sess, acct, err := s.AuthenticateAccount(token)
		if fault.ErrorCode(err) != fault.ECodeUnauthenticated || sess != nil || acct != nil {
			t.Errorf("%s: got %v, %v, %v; want %s and nothing else", what, sess, acct, err, fault.ECodeUnauthenticated)
		}
	}
	refused("an unknown token naming a real account", kv.AccessToken(idA, [32]byte{3}))
	if err := s.Logout(older); err != nil {
		t.Fatal(err)
	}
	refused("a closed session's token", older)
	c.Advance(15 * time.Minute)
	refused("an expired token", named)
}
