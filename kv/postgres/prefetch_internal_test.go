package postgres

import (
	"bytes"
	"fmt"
	"testing"

	"sealbox/kv/engine"
)

// TestPrefetch: one Prefetch reads keys of two tables in one round trip;
// the Gets that follow answer what a Get alone would (a value, an empty
// value, no row, the transaction's own pending write) and cost none; a key
// already read or written is not asked for again; a Prefetch of many large
// values keeps no more than readCacheBytes, and every Get still finds its
// value.
func TestPrefetch(t *testing.T) {
	a, b, big := []byte("a"), []byte("b"), []byte("big")
	e := openTestEngine(t, a, b, big)
	value := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 64<<10) }
	const bigValues = 40 // 2.5 MiB, past readCacheBytes
	err := e.Update(func(tx engine.Tx) error {
		puts := []struct {
			bucket   []byte
			key, val string
		}{{a, "one", "1"}, {a, "empty", ""}, {a, "pending", "stored"}, {b, "three", "3"}}
		for _, p := range puts {
			if err := tx.Bucket(p.bucket).Put([]byte(p.key), []byte(p.val)); err != nil {
				return err
			}
		}
		for i := range bigValues {
			if err := tx.Bucket(big).Put(fmt.Appendf(nil, "k%02d", i), value(i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	trips := func() uint64 { return e.Stats().RoundTrips }
	err = e.Update(func(tx engine.Tx) error {
		p := tx.(engine.Prefetcher)
		if err := tx.Bucket(a).Put([]byte("pending"), []byte("written")); err != nil {
			return err
		}
		start := trips()
		if err := p.Prefetch(nil); err != nil || trips() != start {
			return fmt.Errorf("an empty prefetch: %v, %d round trips", err, trips()-start)
		}
		keys := []engine.Key{
			{Bucket: a, Key: []byte("one")}, {Bucket: a, Key: []byte("empty")}, {Bucket: a, Key: []byte("pending")},
			{Bucket: a, Key: []byte("missing")}, {Bucket: b, Key: []byte("three")}, {Bucket: a, Key: []byte("one")},
		}
		if err := p.Prefetch(keys); err != nil {
			return err
		}
		if n := trips() - start; n != 1 {
			return fmt.Errorf("the prefetch took %d round trips", n)
		}
		for _, want := range []struct {
			bucket []byte
			key    string
			val    []byte
		}{{a, "one", []byte("1")}, {a, "empty", []byte{}}, {a, "pending", []byte("written")}, {a, "missing", nil}, {b, "three", []byte("3")}} {
			got, err := tx.Bucket(want.bucket).Get([]byte(want.key))
			if err != nil {
				return err
			}
			if !bytes.Equal(got, want.val) || (got == nil) != (want.val == nil) {
				return fmt.Errorf("%s/%s read %q, want %q", want.bucket, want.key, got, want.val)
			}
		}
		if err := p.Prefetch(keys); err != nil {
			return err
		}
		if n := trips() - start; n != 1 {
			return fmt.Errorf("the Gets and a second prefetch of the same keys took %d more round trips", n-1)
		}
		var many []engine.Key
		for i := range bigValues {
			many = append(many, engine.Key{Bucket: big, Key: fmt.Appendf(nil, "k%02d", i)})
		}
		if err := p.Prefetch(many); err != nil {
			return err
		}
		for i, k := range many {
			v, err := tx.Bucket(big).Get(k.Key)
			if err != nil {
				return err
			}
			if !bytes.Equal(v, value(i)) {
				return fmt.Errorf("big value %d read as %d bytes", i, len(v))
			}
		}
		if kept := tx.(*pgTx).readBytes; kept > readCacheBytes {
			return fmt.Errorf("the transaction kept %d bytes of its reads, more than %d", kept, readCacheBytes)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
