package kv_test

import (
	"errors"
	"strings"
	"testing"

	"sealbox/kv"
)

// TestBindNodeKeys: the first start records the keys; the same keys are
// accepted again; a node with another server.key or log key is refused,
// naming which, and its keys are not recorded.
func TestBindNodeKeys(t *testing.T) {
	s, _ := MustOpenStore(t)
	seal, logKey := []byte("fingerprint-of-the-first-key"), "sealbox/test+12345678+AAAA"
	if err := s.BindNodeKeys(seal, logKey); err != nil {
		t.Fatalf("first start: %v", err)
	}
	if err := s.BindNodeKeys(seal, logKey); err != nil {
		t.Fatalf("the same keys again: %v", err)
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
			err := s.BindNodeKeys(tc.seal, tc.logKey)
			if !errors.Is(err, kv.ErrKeysDiffer) || !strings.Contains(err.Error(), tc.mention) {
				t.Fatalf("got %v, want ErrKeysDiffer saying %q", err, tc.mention)
			}
		})
	}
	if err := s.BindNodeKeys(seal, logKey); err != nil {
		t.Fatalf("a refused node changed the record: %v", err)
	}
}
