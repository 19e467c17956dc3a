package kv

import (
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"sealbox/kv/bolt"
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

// countingEngine is bbolt, exclusive as bbolt is, counting its read
// transactions.
type countingEngine struct {
	*bolt.Engine
	views atomic.Int64
}

func (e *countingEngine) View(fn func(Tx) error) error {
	e.views.Add(1)
	return e.Engine.View(fn)
}

// TestAccountReadCached: the caller's account, which every profile read
// shows, is read from the engine once between writes; a write makes the
// next read see it, and a caller changing the Account it got changes
// nothing in the cache.
func TestAccountReadCached(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sealbox.db")
	b, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := &countingEngine{Engine: b}
	s, err := OpenEngine(e, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const id = "0b5f2a9e-7c1d-4e8a-b3f6-9d2c4e6a8b10"
	sess := &Session{ID: "s1", AccountID: id, AccessExpiresAt: time.Now().Add(time.Hour), RefreshExpiresAt: time.Now().Add(time.Hour)}
	if err := s.CreateAccount(&Account{ID: id, Email: "a@example.org", CreatedAt: time.Now()}, sess, "sbx_at_0", "sbx_rt_0"); err != nil {
		t.Fatal(err)
	}
	read := func() *Account {
		t.Helper()
		a, err := s.Account(id)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	first := read()
	first.Email = "changed by the caller"
	before := e.views.Load()
	for range 3 {
		if got := read(); got.Email != "a@example.org" {
			t.Fatalf("email %q, want the stored one", got.Email)
		}
	}
	if n := e.views.Load() - before; n != 0 {
		t.Errorf("%d read transactions for 3 reads of an unchanged account, want 0", n)
	}
	name := "Ada"
	if _, err := s.SetDisplayName(id, &name); err != nil {
		t.Fatal(err)
	}
	if got := read(); got.DisplayName == nil || *got.DisplayName != name {
		t.Fatalf("display name %v after the write, want %q", got.DisplayName, name)
	}
}
