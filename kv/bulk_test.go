package kv_test

import (
	"errors"
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/kv/kvtest"
)

// TestBulk: records written in one transaction are all there; a failing
// function leaves nothing; the email index stays unique.
func TestBulk(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	now := c.Now()
	err := s.Bulk(func(b *kv.Bulk) error {
		a := &kv.Account{ID: "bulk-1", Email: "bulk1@example.org", CreatedAt: now}
		if err := b.Account(a); err != nil {
			return err
		}
		if err := b.Session(newSession(c, a.ID, "bulk-s1"), "at-bulk", "rt-bulk"); err != nil {
			return err
		}
		return b.Hold(a.ID, kv.Blob{Hash: hexHash('b'), Size: 42, StoredAt: now})
	})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := s.UserSummary("bulk1@example.org")
	if err != nil || sum.LiveSessions != 1 || sum.BlobsHeld != 1 || sum.BytesHeld != 42 {
		t.Fatalf("after the bulk write: %+v %v", sum, err)
	}

	refused := errors.New("refused")
	err = s.Bulk(func(b *kv.Bulk) error {
		if err := b.Account(&kv.Account{ID: "bulk-2", Email: "bulk2@example.org", CreatedAt: now}); err != nil {
			return err
		}
		return refused
	})
	if !errors.Is(err, refused) {
		t.Fatalf("a failing bulk: %v", err)
	}
	if _, err := s.AccountByEmail("bulk2@example.org"); fault.ErrorCode(err) != fault.ECodeAccountNotFound {
		t.Fatalf("a failed bulk left its account: %v", err)
	}
	err = s.Bulk(func(b *kv.Bulk) error {
		return b.Account(&kv.Account{ID: "bulk-3", Email: "bulk1@example.org", CreatedAt: now.Add(time.Second)})
	})
	if fault.ErrorCode(err) != fault.ECodeAccountExists {
		t.Fatalf("a second account for one address in bulk: %v", err)
	}
}
