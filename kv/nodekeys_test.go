package kv_test

import (
	"errors"
	"strings"
	"testing"

	"sealbox/kv"
	"sealbox/kv/kvtest"
)

// TestBindNodeKeys: the first start records the keys; the same keys are
// accepted again; a node with another server.key or log key is refused once
// the store served (naming which key, recording nothing), and bound to the
// new keys while it never served.
func TestBindNodeKeys(t *testing.T) {
	s, _ := kvtest.MustOpenStore(t)
	seal, logKey := []byte("fingerprint-of-the-first-key"), "sealbox/test+12345678+AAAA"
	if rebound, err := s.BindNodeKeys([]byte("keys of a first start that failed"), "sealbox/test+0+0"); err != nil || rebound {
		t.Fatalf("first start: %v, rebound %v", err, rebound)
	}
	// That start signed a checkpoint of the empty log under its key.
	empty, err := s.LogTree()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SaveCheckpoint(&kv.LogCheckpoint{Root: empty.Hash, Note: []byte("signed by the failed start's key")}); err != nil {
		t.Fatal(err)
	}
	if rebound, err := s.BindNodeKeys(seal, logKey); err != nil || !rebound {
		t.Fatalf("other keys on a store that never served: %v, rebound %v; want them bound, saying so", err, rebound)
	}
	if cp, err := s.LastCheckpoint(); err != nil || cp != nil {
		t.Fatalf("the old key's checkpoint after the re-binding: %+v, %v; want it gone", cp, err)
	}
	if rebound, err := s.BindNodeKeys(seal, logKey); err != nil || rebound {
		t.Fatalf("the same keys again: %v, rebound %v", err, rebound)
	}
	if err := s.AddAccount(&kv.Account{ID: "acct-1", Email: "first@example.org"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		seal    []byte
		logKey  string
		mention string
	}{
		{"other server.key", []byte("fingerprint-of-another-key"), logKey, "server.key differs"},
		{"other log key", seal, "sealbox/test+87654321+BBBB", "the transparency log key differs"},
		{"both", []byte("x"), "y", "server.key and the transparency log key differ"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.BindNodeKeys(tc.seal, tc.logKey)
			if !errors.Is(err, kv.ErrKeysDiffer) || !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("got %v, want ErrKeysDiffer saying %q", err, tc.mention)
			}
		})
	}
	if _, err := s.BindNodeKeys(seal, logKey); err != nil {
		t.Fatalf("a refused node changed the record: %v", err)
	}
}

// TestCheckNodeKeys: CheckNodeKeys answers what BindNodeKeys would, and
// records nothing: a store that never served accepts any keys (and stays
// unbound), one that served refuses other keys, naming them, and accepts
// its own.
func TestCheckNodeKeys(t *testing.T) {
	s, _ := kvtest.MustOpenStore(t)
	seal, logKey := []byte("fingerprint-of-the-key"), "sealbox/test+12345678+AAAA"
	if err := s.CheckNodeKeys([]byte("any"), "sealbox/test+0+0"); err != nil {
		t.Fatalf("a fresh store: %v", err)
	}
	if rebound, err := s.BindNodeKeys(seal, logKey); err != nil || rebound {
		t.Fatalf("binding after the check: %v, rebound %v; want a first binding (the check recorded nothing)", err, rebound)
	}
	if err := s.AddAccount(&kv.Account{ID: "acct-1", Email: "first@example.org"}); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckNodeKeys(seal, logKey); err != nil {
		t.Fatalf("the store's own keys: %v", err)
	}
	err := s.CheckNodeKeys([]byte("another"), logKey)
	if !errors.Is(err, kv.ErrKeysDiffer) || !strings.Contains(err.Error(), "server.key differs") {
		t.Fatalf("another server.key: %v, want ErrKeysDiffer naming it", err)
	}
}
