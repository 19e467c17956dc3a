package sealed

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestLinkMessages: every message type goes through its canonical JSON and
// back; every other spelling, and every field of the wrong size, type or
// message, is refused.
func TestLinkMessages(t *testing.T) {
	pub := bytes.Repeat([]byte{7}, 32)
	msgs := []LinkMessage{
		{Type: LinkTypeCommit, Commit: LinkCommitment(pub)},
		{Type: LinkTypeKey, PublicKey: pub},
		{Type: LinkTypeReveal, PublicKey: pub},
		{Type: LinkTypeKeys, Sealed: bytes.Repeat([]byte{1}, DeviceSealSize)},
		{Type: LinkTypeDone},
		{Type: LinkTypeAbort, Reason: AbortMismatch},
	}
	for _, m := range msgs {
		text := m.Marshal()
		got, err := ParseLinkMessage(text)
		if err != nil || got.Type != m.Type || !bytes.Equal(got.Commit, m.Commit) || !bytes.Equal(got.PublicKey, m.PublicKey) ||
			!bytes.Equal(got.Sealed, m.Sealed) || got.Reason != m.Reason {
			t.Fatalf("%s: got %+v, %v", text, got, err)
		}
	}
	if got, want := (LinkMessage{Type: LinkTypeKey, PublicKey: pub}).Marshal(), `{"v":1,"type":"key","public_key":"BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc"}`; got != want {
		t.Fatalf("key message: got %s, want %s", got, want)
	}
	refused := map[string]string{
		"not JSON":            `commit`,
		"white space":         `{"v":1, "type":"done"}`,
		"key order":           `{"type":"done","v":1}`,
		"key case":            `{"v":1,"TYPE":"done"}`,
		"key twice":           `{"v":1,"type":"key","type":"done"}`,
		"unknown key":         `{"v":1,"type":"done","x":1}`,
		"data after":          `{"v":1,"type":"done"}{}`,
		"unknown type":        `{"v":1,"type":"hello"}`,
		"field of another":    `{"v":1,"type":"done","public_key":"BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc"}`,
		"field missing":       `{"v":1,"type":"key"}`,
		"short key":           `{"v":1,"type":"key","public_key":"BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBw"}`,
		"padded key":          `{"v":1,"type":"key","public_key":"BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc="}`,
		"standard alphabet":   `{"v":1,"type":"commit","commit":"+wcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc"}`,
		"abort without why":   `{"v":1,"type":"abort"}`,
		"abort unknown why":   `{"v":1,"type":"abort","reason":"bored"}`,
		"version not integer": `{"v":"1","type":"done"}`,
		"too long":            `{"v":1,"type":"abort","reason":"` + strings.Repeat("x", 2000) + `"}`,
	}
	for name, text := range refused {
		if _, err := ParseLinkMessage(text); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %s: got %v, want ErrMalformed", name, text, err)
		}
	}
	var ve *VersionError
	if _, err := ParseLinkMessage(`{"v":2,"type":"done"}`); !errors.As(err, &ve) || ve.Version != 2 {
		t.Fatalf("version 2: %v", err)
	}
}

// TestLinkSAS: the comparison string is six digits, fixed by both keys in
// their roles, and a typed string matches with spaces and dashes only.
func TestLinkSAS(t *testing.T) {
	a, b := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	sas := LinkSAS(a, b)
	if len(sas) != LinkSASDigits || strings.Trim(sas, "0123456789") != "" {
		t.Fatalf("sas %q", sas)
	}
	if LinkSAS(a, b) != sas || LinkSAS(b, a) == sas {
		t.Fatal("the string does not depend on both keys in their roles")
	}
	// The vector of FORMAT.md §13.2.
	if got := LinkSAS(a, b); got != "700843" {
		t.Fatalf("LinkSAS(01..., 02...) = %s", got)
	}
	for typed, want := range map[string]bool{sas: true, sas[:3] + " " + sas[3:]: true, sas[:3] + "-" + sas[3:]: true,
		sas[:5]: false, sas + "0": false, "x" + sas: false, "": false} {
		if SameLinkSAS(typed, sas) != want {
			t.Errorf("SameLinkSAS(%q, %q) != %v", typed, sas, want)
		}
	}
	// The vector of FORMAT.md §13.1.
	if got := (LinkMessage{Type: LinkTypeCommit, Commit: LinkCommitment(a)}).Marshal(); got != `{"v":1,"type":"commit","commit":"ZJmWmjSvnXcZ2YzfDP38YK62g_L5I_M2FO4DwBLr3I4"}` {
		t.Fatalf("commit message of 01...: %s", got)
	}
	if !CheckLinkCommitment(LinkCommitment(a), a) || CheckLinkCommitment(LinkCommitment(a), b) {
		t.Fatal("commitment")
	}
}

// TestOpenEscrowIdentity: the master key opens the identity slot; another
// key does not.
func TestOpenEscrowIdentity(t *testing.T) {
	s := AccountSecrets{Master: NewMasterKey(), Identity: NewIdentitySeed()}
	b, err := newEscrow(s, "passphrase", NewRecoveryKey(), Argon2Params{Time: 1, MemoryKiB: 64, Threads: 1}, [16]byte{1}, [3][nonceSize]byte{{1}, {2}, {3}})
	if err != nil {
		t.Fatal(err)
	}
	if id, err := OpenEscrowIdentity(b, s.Master); err != nil || id != s.Identity {
		t.Fatalf("with the master key: %v", err)
	}
	if _, err := OpenEscrowIdentity(b, NewMasterKey()); !errors.Is(err, ErrAuth) {
		t.Fatalf("with another key: %v, want ErrAuth", err)
	}
}

// FuzzLinkMessage: whatever ParseLinkMessage accepts is its own canonical
// form.
func FuzzLinkMessage(f *testing.F) {
	pub := bytes.Repeat([]byte{7}, 32)
	f.Add((LinkMessage{Type: LinkTypeCommit, Commit: LinkCommitment(pub)}).Marshal())
	f.Add((LinkMessage{Type: LinkTypeReveal, PublicKey: pub}).Marshal())
	f.Add((LinkMessage{Type: LinkTypeKeys, Sealed: bytes.Repeat([]byte{1}, DeviceSealSize)}).Marshal())
	f.Add((LinkMessage{Type: LinkTypeAbort, Reason: AbortFailed}).Marshal())
	f.Add(`{"v":1,"type":"done"}`)
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseLinkMessage(s)
		if err != nil {
			return
		}
		if m.Marshal() != s {
			t.Fatalf("accepted %q, which is not its canonical form %q", s, m.Marshal())
		}
	})
}
