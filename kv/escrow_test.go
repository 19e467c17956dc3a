package kv_test

import (
	"bytes"
	"testing"
	"time"

	"sealbox/kv/fault"
	"sealbox/kv/kvtest"
)

// TestEscrow: stored verbatim, replaced by the next one with replaced set,
// and kept per account.
func TestEscrow(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	a, b := mustAccount(t, s, c, 1), mustAccount(t, s, c, 2)
	if _, err := s.Escrow(a.ID); fault.ErrorCode(err) != fault.ECodeEscrowNotFound {
		t.Fatalf("before any: %v", err)
	}
	at, replaced, err := s.PutEscrow(a.ID, []byte("wrapped 1"))
	if err != nil || replaced || !at.Equal(c.Now()) {
		t.Fatalf("first: %v %v %v", at, replaced, err)
	}
	c.Advance(time.Minute)
	if _, replaced, err := s.PutEscrow(a.ID, []byte("wrapped 2")); err != nil || !replaced {
		t.Fatalf("second: %v %v", replaced, err)
	}
	e, err := s.Escrow(a.ID)
	if err != nil || !bytes.Equal(e.Bytes, []byte("wrapped 2")) || !e.StoredAt.Equal(c.Now()) {
		t.Fatalf("read: %+v %v", e, err)
	}
	if _, err := s.Escrow(b.ID); fault.ErrorCode(err) != fault.ECodeEscrowNotFound {
		t.Fatalf("another account's: %v", err)
	}
}
