// Package enginetest is the contract every engine.Engine keeps, as one test
// suite an adapter's own test runs against a real engine: ordering by bytes,
// bounded scans, atomic updates, consistent views, and Batch.
package enginetest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"sealbox/kv/engine"
)

// Run runs the contract against fresh engines from open, one per subtest.
// The engine is closed when the subtest ends.
func Run(t *testing.T, open func(t *testing.T) engine.Engine) {
	fresh := func(t *testing.T) engine.Engine {
		e := open(t)
		t.Cleanup(func() { e.Close() })
		if err := e.CreateBuckets([][]byte{bucket, other}); err != nil {
			t.Fatal(err)
		}
		return e
	}
	t.Run("buckets", func(t *testing.T) { testBuckets(t, fresh(t)) })
	t.Run("get put delete", func(t *testing.T) { testGetPutDelete(t, fresh(t)) })
	t.Run("update rolls back on error", func(t *testing.T) { testRollback(t, fresh(t)) })
	t.Run("scan", func(t *testing.T) { testScan(t, fresh(t)) })
	t.Run("batch", func(t *testing.T) { testBatch(t, fresh(t)) })
	t.Run("concurrent compare-and-set", func(t *testing.T) { testCompareAndSet(t, fresh(t)) })
	t.Run("scans of a bucket emptied in the transaction", func(t *testing.T) { testEmptied(t, fresh(t)) })
}

var (
	bucket = []byte("enginetest")
	other  = []byte("enginetest_other")
)

func testBuckets(t *testing.T, e engine.Engine) {
	if err := e.CreateBuckets([][]byte{bucket, []byte("enginetest_third")}); err != nil {
		t.Fatalf("creating buckets again: %v", err)
	}
	names, err := e.Buckets()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"enginetest", "enginetest_other", "enginetest_third"} {
		if !names[want] {
			t.Errorf("Buckets() = %v, lacks %s", names, want)
		}
	}
	if names["enginetest_never"] {
		t.Errorf("Buckets() names a bucket never created")
	}
}

func testGetPutDelete(t *testing.T, e engine.Engine) {
	update(t, e, func(tx engine.Tx) error {
		b := tx.Bucket(bucket)
		if v, err := b.Get([]byte("missing")); v != nil || err != nil {
			return fmt.Errorf("Get of a missing key = %q, %v; want nil, nil", v, err)
		}
		if err := b.Put([]byte("k"), []byte("v1")); err != nil {
			return err
		}
		if err := b.Put([]byte("k"), []byte("v2")); err != nil {
			return err
		}
		if v, err := b.Get([]byte("k")); string(v) != "v2" || err != nil {
			return fmt.Errorf("Get after two puts in one transaction = %q, %v; want v2", v, err)
		}
		if err := tx.Bucket(other).Put([]byte("k"), []byte("elsewhere")); err != nil {
			return err
		}
		return b.Put([]byte("gone"), []byte("x"))
	})
	update(t, e, func(tx engine.Tx) error {
		if err := tx.Bucket(bucket).Delete([]byte("gone")); err != nil {
			return err
		}
		return tx.Bucket(bucket).Delete([]byte("never there"))
	})
	view(t, e, func(tx engine.Tx) error {
		for _, c := range []struct {
			bucket []byte
			key    string
			want   []byte
		}{{bucket, "k", []byte("v2")}, {other, "k", []byte("elsewhere")}, {bucket, "gone", nil}} {
			v, err := tx.Bucket(c.bucket).Get([]byte(c.key))
			if err != nil || !bytes.Equal(v, c.want) {
				return fmt.Errorf("%s/%s = %q, %v after commit; want %q", c.bucket, c.key, v, err, c.want)
			}
		}
		return nil
	})
}

func testRollback(t *testing.T, e engine.Engine) {
	update(t, e, func(tx engine.Tx) error { return tx.Bucket(bucket).Put([]byte("kept"), []byte("1")) })
	refused := errors.New("refused")
	err := e.Update(func(tx engine.Tx) error {
		if err := tx.Bucket(bucket).Put([]byte("kept"), []byte("2")); err != nil {
			return err
		}
		if err := tx.Bucket(bucket).Put([]byte("new"), []byte("1")); err != nil {
			return err
		}
		return refused
	})
	if !errors.Is(err, refused) {
		t.Fatalf("Update returned %v, want the function's error", err)
	}
	view(t, e, func(tx engine.Tx) error {
		kept, err1 := tx.Bucket(bucket).Get([]byte("kept"))
		added, err2 := tx.Bucket(bucket).Get([]byte("new"))
		if string(kept) != "1" || added != nil {
			return fmt.Errorf("after a refused update: kept=%q new=%q (%v, %v); want 1 and nothing", kept, added, err1, err2)
		}
		return errors.Join(err1, err2)
	})
	if err := e.View(func(engine.Tx) error { return refused }); !errors.Is(err, refused) {
		t.Fatalf("View returned %v, want the function's error", err)
	}
}

// keys holds bytes that a text collation would misorder: byte order is
// the contract (0x00 before "0", 0xff after "z", a prefix before its
// extensions).
var keys = [][]byte{
	[]byte("a"), []byte("a\x00"), []byte("a\x00\x01"), []byte("a0"), []byte("aZ"), []byte("az"),
	[]byte("a\xff"), []byte("a\xff\xff"), []byte("b"), []byte("\xff"),
}

func testScan(t *testing.T, e engine.Engine) {
	update(t, e, func(tx engine.Tx) error {
		// Put in reverse so order comes from the engine, not insertion.
		for i := len(keys) - 1; i >= 0; i-- {
			if err := tx.Bucket(bucket).Put(keys[i], []byte{byte(i)}); err != nil {
				return err
			}
		}
		return tx.Bucket(other).Put([]byte("a1"), []byte("other bucket"))
	})
	sorted := slices.Clone(keys)
	slices.SortFunc(sorted, bytes.Compare)
	if !slices.EqualFunc(sorted, keys, bytes.Equal) {
		t.Fatal("the test's keys are not in byte order")
	}
	cases := []struct {
		name string
		r    engine.Range
		want [][]byte
	}{
		{"limit from the first key", engine.Range{Limit: 3}, keys[:3]},
		{"whole bucket by limit", engine.Range{Limit: 100}, keys},
		{"from, to", engine.Range{From: []byte("a\x00"), To: []byte("a\xff")}, keys[1:6]},
		{"to only", engine.Range{To: []byte("a0")}, keys[:3]},
		{"from and limit", engine.Range{From: []byte("a1"), Limit: 2}, keys[4:6]},
		{"empty range", engine.Range{From: []byte("c"), To: []byte("d")}, nil},
		{"from past to", engine.Range{From: []byte("b"), To: []byte("a")}, nil},
		{"reverse to", engine.Range{To: []byte("b"), Limit: 2, Reverse: true}, [][]byte{keys[7], keys[6]}},
		{"reverse from, to", engine.Range{From: []byte("aZ"), To: []byte("a\xff"), Reverse: true}, [][]byte{keys[5], keys[4]}},
		{"reverse last key", engine.Range{Limit: 1, Reverse: true}, [][]byte{keys[9]}},
		{"reverse to past the end", engine.Range{To: []byte("\xff\xff"), Limit: 1, Reverse: true}, [][]byte{keys[9]}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got [][]byte
			view(t, e, func(tx engine.Tx) error {
				return tx.Bucket(bucket).Scan(c.r, func(k, v []byte) error {
					if i := slices.IndexFunc(keys, func(x []byte) bool { return bytes.Equal(x, k) }); i < 0 || !bytes.Equal(v, []byte{byte(i)}) {
						return fmt.Errorf("scan yields %q=%q, which was not stored", k, v)
					}
					got = append(got, bytes.Clone(k))
					return nil
				})
			})
			if !slices.EqualFunc(got, c.want, bytes.Equal) {
				t.Fatalf("Scan(%+v) = %q, want %q", c.r, got, c.want)
			}
		})
	}
	view(t, e, func(tx engine.Tx) error {
		b := tx.Bucket(bucket)
		if err := b.Scan(engine.Range{From: []byte("a")}, func(k, v []byte) error { return nil }); !errors.Is(err, engine.ErrUnboundedScan) {
			return fmt.Errorf("a scan with neither an upper bound nor a limit: %v, want ErrUnboundedScan", err)
		}
		n := 0
		if err := b.Scan(engine.Range{Limit: 100}, func(k, v []byte) error { n++; return engine.ErrStopScan }); err != nil || n != 1 {
			return fmt.Errorf("ErrStopScan: %v after %d calls, want nil after 1", err, n)
		}
		stop := errors.New("stop")
		if err := b.Scan(engine.Range{Limit: 100}, func(k, v []byte) error { return stop }); !errors.Is(err, stop) {
			return fmt.Errorf("a scan function's error: %v, want it returned", err)
		}
		return nil
	})
}

// testBatch: concurrent Batch calls all apply, and one whose function fails
// leaves nothing while the others still apply.
func testBatch(t *testing.T, e engine.Engine) {
	const writers = 16
	refused := errors.New("refused")
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.Batch(func(tx engine.Tx) error {
				if err := tx.Bucket(bucket).Put([]byte{'w', byte(i)}, []byte{byte(i)}); err != nil {
					return err
				}
				if i == 0 {
					return refused
				}
				return nil
			})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if want := error(nil); i == 0 {
			if !errors.Is(err, refused) {
				t.Errorf("writer 0: %v, want its own error", err)
			}
		} else if err != want {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	view(t, e, func(tx engine.Tx) error {
		n := 0
		err := tx.Bucket(bucket).Scan(engine.Range{From: []byte("w"), To: []byte("x")}, func(k, _ []byte) error {
			if k[1] == 0 {
				return fmt.Errorf("the refused writer's key was committed")
			}
			n++
			return nil
		})
		if err == nil && n != writers-1 {
			err = fmt.Errorf("%d writers' keys committed, want %d", n, writers-1)
		}
		return err
	})
}

// testCompareAndSet: concurrent read-modify-write updates of one counter,
// and of a range (a scan deciding a write), lose nothing: the engine
// serializes them or runs a loser again.
func testCompareAndSet(t *testing.T, e engine.Engine) {
	const writers, rounds = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				err := e.Update(func(tx engine.Tx) error {
					b := tx.Bucket(bucket)
					v, err := b.Get([]byte("counter"))
					if err != nil {
						return err
					}
					n := 0
					if len(v) == 8 {
						n = int(binary.BigEndian.Uint64(v))
					}
					// The next free slot is decided by a scan: two writers
					// that see the same slots must not both take one.
					taken := 0
					if err := b.Scan(engine.Range{From: []byte("slot/"), To: []byte("slot0")}, func(_, _ []byte) error { taken++; return nil }); err != nil {
						return err
					}
					if err := b.Put(fmt.Appendf(nil, "slot/%04d", taken), []byte{byte(w), byte(r)}); err != nil {
						return err
					}
					return b.Put([]byte("counter"), binary.BigEndian.AppendUint64(nil, uint64(n+1)))
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	view(t, e, func(tx engine.Tx) error {
		v, err := tx.Bucket(bucket).Get([]byte("counter"))
		if err != nil || len(v) != 8 || binary.BigEndian.Uint64(v) != writers*rounds {
			return fmt.Errorf("counter = %x (%v), want %d", v, err, writers*rounds)
		}
		slots := 0
		err = tx.Bucket(bucket).Scan(engine.Range{From: []byte("slot/"), To: []byte("slot0")}, func(_, _ []byte) error { slots++; return nil })
		if err == nil && slots != writers*rounds {
			err = fmt.Errorf("%d slots taken, want %d: two writers took one slot", slots, writers*rounds)
		}
		return err
	})
}

// testEmptied: a bucket of many pages, all deleted in one transaction, scans
// as empty in it, forward and in reverse (bbolt's Last once looped forever
// on such a bucket).
func testEmptied(t *testing.T, e engine.Engine) {
	update(t, e, func(tx engine.Tx) error {
		for i := range 3000 {
			if err := tx.Bucket(bucket).Put(fmt.Appendf(nil, "k%05d", i), []byte("value")); err != nil {
				return err
			}
		}
		return nil
	})
	update(t, e, func(tx engine.Tx) error {
		b := tx.Bucket(bucket)
		for i := range 3000 {
			if err := b.Delete(fmt.Appendf(nil, "k%05d", i)); err != nil {
				return err
			}
		}
		for _, r := range []engine.Range{{Limit: 1}, {Limit: 1, Reverse: true}, {To: []byte("k9"), Limit: 1, Reverse: true}} {
			if err := b.Scan(r, func(k, _ []byte) error { return fmt.Errorf("Scan(%+v) yields %q from an emptied bucket", r, k) }); err != nil {
				return err
			}
		}
		return nil
	})
}

func update(t *testing.T, e engine.Engine, fn func(engine.Tx) error) {
	t.Helper()
	if err := e.Update(fn); err != nil {
		t.Fatal(err)
	}
}

func view(t *testing.T, e engine.Engine, fn func(engine.Tx) error) {
	t.Helper()
	if err := e.View(fn); err != nil {
		t.Fatal(err)
	}
}
