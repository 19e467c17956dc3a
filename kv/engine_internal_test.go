package kv

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"sealbox/kv/bolt"
)

// The engine-neutral helpers every store file scans with, on a real bbolt
// engine: prefix bounds, paging past one page, stopping, and deleting what
// a scan found only after it.

func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct{ prefix, want []byte }{
		{[]byte("ab"), []byte("ac")},
		{[]byte("a\xff"), []byte("b")},
		{[]byte("a\xff\xff"), []byte("b")},
		{[]byte("\xff\xff"), nil},
		{[]byte("acct-1\x00"), []byte("acct-1\x01")},
	} {
		if got := prefixEnd(c.prefix); !bytes.Equal(got, c.want) {
			t.Errorf("prefixEnd(%q) = %q, want %q", c.prefix, got, c.want)
		}
	}
}

func TestScanHelpers(t *testing.T) {
	e, err := bolt.Open(filepath.Join(t.TempDir(), "helpers.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	name := []byte("helpers")
	if err := e.CreateBuckets([][]byte{name}); err != nil {
		t.Fatal(err)
	}
	// 2,500 keys: more than two of scanPages' pages.
	const n = 2500
	err = e.Update(func(tx Tx) error {
		for i := range n {
			if err := tx.Bucket(name).Put(fmt.Appendf(nil, "p/%05d", i), member); err != nil {
				return err
			}
		}
		return tx.Bucket(name).Put([]byte("q"), member)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = e.Update(func(tx Tx) error {
		b := tx.Bucket(name)
		seen := 0
		if err := scanPages(b, func(k, _ []byte) error { seen++; return nil }); err != nil || seen != n+1 {
			return fmt.Errorf("scanPages saw %d keys (%v), want %d", seen, err, n+1)
		}
		seen = 0
		err := scanPages(b, func(k, _ []byte) error {
			if seen++; seen == 1000 {
				return ErrStopScan
			}
			return nil
		})
		if err != nil || seen != 1000 {
			return fmt.Errorf("scanPages stopped at its page's end: %d keys (%v), want 1000", seen, err)
		}
		if keys, err := prefixKeys(b, []byte("p/001")); err != nil || len(keys) != 100 {
			return fmt.Errorf("prefixKeys: %d (%v), want 100", len(keys), err)
		}
		if last, err := lastKey(b); err != nil || string(last) != "q" {
			return fmt.Errorf("lastKey = %q (%v), want q", last, err)
		}
		if err := deletePrefix(b, []byte("p/")); err != nil {
			return err
		}
		if keys, err := prefixKeys(b, []byte("p/")); err != nil || len(keys) != 0 {
			return fmt.Errorf("after deletePrefix: %d keys (%v)", len(keys), err)
		}
		if v, err := b.Get([]byte("q")); v == nil || err != nil {
			return fmt.Errorf("deletePrefix took a key outside its prefix (%v)", err)
		}
		if err := clearBucket(b); err != nil {
			return err
		}
		last, err := lastKey(b)
		if err == nil && last != nil {
			err = errors.New("clearBucket left a key")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	err = e.View(func(tx Tx) error {
		page := pageAfter("p/00001", 2)
		return tx.Bucket(name).Scan(page, func(k, _ []byte) error { return errors.New("the bucket was cleared") })
	})
	if err != nil {
		t.Fatal(err)
	}
}
