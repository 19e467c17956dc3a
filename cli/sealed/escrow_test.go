package sealed

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// testArgon2 are parameters small enough for tests; only tests may create
// escrows with them (export_test.go).
var testArgon2 = Argon2Params{Time: 1, MemoryKiB: 64, Threads: 1}

func TestEscrowRoundTrip(t *testing.T) {
	s := AccountSecrets{Master: NewMasterKey(), Identity: NewIdentitySeed()}
	rk := NewRecoveryKey()
	b, err := NewEscrow(s, "pässword", rk, testArgon2)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != EscrowSize || len(b) > 64<<10 {
		t.Fatalf("escrow is %d bytes, want %d (the server takes up to 64 KiB)", len(b), EscrowSize)
	}
	if got, err := OpenEscrowWithPassphrase(b, "pässword"); err != nil || got != s {
		t.Errorf("by passphrase: %v", err)
	}
	if got, err := OpenEscrowWithRecoveryKey(b, rk); err != nil || got != s {
		t.Errorf("by recovery key: %v", err)
	}
	again, _ := NewEscrow(s, "pässword", rk, testArgon2)
	if bytes.Equal(again, b) {
		t.Error("two escrows of the same secrets are equal: salt and nonces are not fresh")
	}
}

// TestEscrowRefusesTampering: a wrong secret or any changed byte is refused,
// and the header's checks come before any key derivation.
func TestEscrowRefusesTampering(t *testing.T) {
	s := AccountSecrets{Master: NewMasterKey(), Identity: NewIdentitySeed()}
	rk := NewRecoveryKey()
	b, err := NewEscrow(s, "passphrase", rk, testArgon2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenEscrowWithPassphrase(b, "Passphrase"); !errors.Is(err, ErrAuth) {
		t.Errorf("wrong passphrase: %v, want ErrAuth", err)
	}
	if _, err := OpenEscrowWithRecoveryKey(b, NewRecoveryKey()); !errors.Is(err, ErrAuth) {
		t.Errorf("wrong recovery key: %v, want ErrAuth", err)
	}
	// Every byte but the magic and version, its low bit flipped, stops at
	// least one way in: parameters and salt change the keys (or fall out of
	// range), a slot fails its tag, and the identity slot fails after the
	// master key opened. Byte 11 is skipped: flipped, it asks Argon2id for
	// 64 MiB, too slow for a test run this often.
	for i := 5; i < len(b); i++ {
		if i == 11 {
			continue
		}
		c := bytes.Clone(b)
		c[i] ^= 0x01
		_, e1 := OpenEscrowWithPassphrase(c, "passphrase")
		_, e2 := OpenEscrowWithRecoveryKey(c, rk)
		if e1 == nil && e2 == nil {
			t.Errorf("escrow with byte %d flipped opened both ways", i)
		}
		if i >= escrowHeaderSize+escrowSlotSize*2 && (e1 == nil || e2 == nil) {
			t.Errorf("escrow with identity-slot byte %d flipped opened", i)
		}
	}
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"truncated", b[:len(b)-1], "malformed"},
		{"extended", append(bytes.Clone(b), 0), "malformed"},
		{"empty", nil, "malformed"},
		{"unknown version", append([]byte("SBXE\x07"), b[5:]...), "escrow format version 7 is not supported"},
		{"unknown KDF", append([]byte("SBXE\x01\x02"), b[6:]...), "KDF 2 unknown"},
		{"memory over the ceiling", append([]byte("SBXE\x01\x01\x00\x00\x00\x01\xff\xff\xff\xff"), b[14:]...), "out of range"},
		{"no passes", append([]byte("SBXE\x01\x01\x00\x00\x00\x00"), b[10:]...), "out of range"},
	} {
		_, err := OpenEscrowWithPassphrase(c.b, "passphrase")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

// TestWeakParamsRefused: outside tests, the package refuses to create an
// escrow or a wrapped secret under the floors (FORMAT.md §5.1, §9.2), and
// its defaults are above them.
func TestWeakParamsRefused(t *testing.T) {
	allowWeak = false
	defer func() { allowWeak = true }()
	s := AccountSecrets{Master: NewMasterKey(), Identity: NewIdentitySeed()}
	for _, p := range []Argon2Params{testArgon2, {Time: 2, MemoryKiB: 64 << 10, Threads: 4}, {Time: 3, MemoryKiB: 32 << 10, Threads: 4}} {
		if _, err := NewEscrow(s, "passphrase", NewRecoveryKey(), p); !errors.Is(err, ErrWeakParams) {
			t.Errorf("NewEscrow with %+v: %v, want ErrWeakParams", p, err)
		}
	}
	if _, _, err := WrapLinkKey(NewLinkSecret(), "passphrase", MinPBKDF2Iterations-1); !errors.Is(err, ErrWeakParams) {
		t.Errorf("WrapLinkKey with %d iterations: %v, want ErrWeakParams", MinPBKDF2Iterations-1, err)
	}
	d := DefaultArgon2
	if d.Time < minArgon2.Time || d.MemoryKiB < minArgon2.MemoryKiB || d.Threads < minArgon2.Threads {
		t.Errorf("DefaultArgon2 %+v is under the floor %+v", d, minArgon2)
	}
}

func TestRecoveryKeyTypos(t *testing.T) {
	for range 20 {
		k := NewRecoveryKey()
		text := k.String()
		if got, err := ParseRecoveryKey(text); err != nil || got != k {
			t.Fatalf("%s does not parse back: %v", text, err)
		}
		// Every single-character substitution within the alphabet is caught
		// by the check bytes.
		for i := range len(text) {
			if text[i] == '-' {
				continue
			}
			for _, c := range []byte(crockford) {
				if c == text[i] {
					continue
				}
				typo := text[:i] + string(c) + text[i+1:]
				if _, err := ParseRecoveryKey(typo); err == nil {
					t.Errorf("typo %s of %s accepted", typo, text)
				}
			}
		}
		// Two neighbouring characters swapped, when they differ.
		for i := 0; i+1 < len(text); i++ {
			if text[i] == text[i+1] || text[i] == '-' || text[i+1] == '-' {
				continue
			}
			b := []byte(text)
			b[i], b[i+1] = b[i+1], b[i]
			if _, err := ParseRecoveryKey(string(b)); err == nil {
				t.Errorf("swap %s of %s accepted", b, text)
			}
		}
	}
}

// TestReplacePassphrase: the new passphrase opens the escrow, the old one
// no longer does, and the recovery key still does, with the same secrets.
func TestReplacePassphrase(t *testing.T) {
	s := AccountSecrets{Master: NewMasterKey(), Identity: NewIdentitySeed()}
	rk := NewRecoveryKey()
	b, err := NewEscrow(s, "old passphrase", rk, testArgon2)
	if err != nil {
		t.Fatal(err)
	}
	nb, err := ReplacePassphrase(b, s, "new passphrase")
	if err != nil || len(nb) != EscrowSize {
		t.Fatalf("%d bytes, %v", len(nb), err)
	}
	if got, err := OpenEscrowWithPassphrase(nb, "new passphrase"); err != nil || got != s {
		t.Fatalf("the new passphrase: %v", err)
	}
	if _, err := OpenEscrowWithPassphrase(nb, "old passphrase"); err == nil {
		t.Fatal("the old passphrase still opens the escrow")
	}
	if got, err := OpenEscrowWithRecoveryKey(nb, rk); err != nil || got != s {
		t.Fatalf("the recovery key: %v", err)
	}
	if _, err := ReplacePassphrase(nb[:100], s, "x"); err == nil {
		t.Fatal("a truncated escrow was rewritten")
	}
}

// TestEscrowWithoutPassphrase: an escrow whose passphrase slot is removed
// opens with the recovery key only, the rest byte for byte; a passphrase
// slot put back opens again.
func TestEscrowWithoutPassphrase(t *testing.T) {
	s := AccountSecrets{Master: NewMasterKey(), Identity: NewIdentitySeed()}
	rk := NewRecoveryKey()
	b, err := newEscrow(s, "passphrase", rk, Argon2Params{Time: 1, MemoryKiB: 64, Threads: 1}, [16]byte{1}, [3][nonceSize]byte{{1}, {2}, {3}})
	if err != nil {
		t.Fatal(err)
	}
	if !HasPassphraseSlot(b) {
		t.Fatal("a new escrow has no passphrase slot")
	}
	none, err := RemovePassphrase(b)
	if err != nil || HasPassphraseSlot(none) || len(none) != EscrowSize ||
		!bytes.Equal(none[:escrowHeaderSize], b[:escrowHeaderSize]) || !bytes.Equal(none[escrowHeaderSize+escrowSlotSize:], b[escrowHeaderSize+escrowSlotSize:]) {
		t.Fatalf("removed: %v", err)
	}
	if _, err := OpenEscrowWithPassphrase(none, "passphrase"); !errors.Is(err, ErrNoPassphraseSlot) {
		t.Fatalf("the passphrase on an escrow without its slot: %v", err)
	}
	if got, err := OpenEscrowWithRecoveryKey(none, rk); err != nil || got != s {
		t.Fatalf("the recovery key: %v", err)
	}
	if id, err := OpenEscrowIdentity(none, s.Master); err != nil || id != s.Identity {
		t.Fatalf("the master key: %v", err)
	}
	back, err := ReplacePassphrase(none, s, "another")
	if err != nil || !HasPassphraseSlot(back) {
		t.Fatalf("put back: %v", err)
	}
	if got, err := OpenEscrowWithPassphrase(back, "another"); err != nil || got != s {
		t.Fatalf("the new passphrase: %v", err)
	}
}
