package kv

import (
	"path/filepath"
	"testing"
)

// TestCachedKeepsNoMisses: unknown tokens and link ids, which anyone can
// send, leave nothing in the caches, so they cannot push live entries out.
func TestCachedKeepsNoMisses(t *testing.T) {
	s, err := openFile(filepath.Join(t.TempDir(), "sealbox.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.sessionCache == nil || s.shareCache == nil {
		t.Fatal("the caches are off on bbolt")
	}
	for i := range 100 {
		token := string(rune('a'+i%26)) + "-unknown-token"
		if _, err := s.Authenticate(token); err == nil {
			t.Fatal("an unknown token was accepted")
		}
		if _, err := s.ShareBlob("0123456789abcdef0123456789abcdef", "ab"+token); err == nil {
			t.Fatal("an unknown link served a blob")
		}
	}
	if n := len(s.sessionCache.entries); n != 0 {
		t.Errorf("%d sessions cached for unknown tokens, want 0", n)
	}
	if n := len(s.shareCache.entries); n != 0 {
		t.Errorf("%d blobs of share links cached for an unknown link, want 0", n)
	}
}
