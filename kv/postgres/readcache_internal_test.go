package postgres

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"sealbox/kv/engine"
)

// TestReadCacheIsBounded: a transaction that reads 8 MiB of values (as
// check does, reading every blob in one transaction) keeps at most
// readCacheBytes of them, and every Get, cached or not, finds its value.
func TestReadCacheIsBounded(t *testing.T) {
	name := []byte("values")
	e := openTestEngine(t, name)
	value := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 64<<10) }
	const n = 128
	err := e.Update(func(tx engine.Tx) error {
		for i := range n {
			if err := tx.Bucket(name).Put(fmt.Appendf(nil, "k%03d", i), value(i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = e.View(func(tx engine.Tx) error {
		for round := range 2 {
			for i := range n {
				v, err := tx.Bucket(name).Get(fmt.Appendf(nil, "k%03d", i))
				if err != nil {
					return err
				}
				if !bytes.Equal(v, value(i)) {
					return fmt.Errorf("round %d: key %d read %d bytes, not its value", round, i, len(v))
				}
			}
		}
		var kept int
		for _, w := range tx.(*pgTx).writes {
			for k, v := range w.read {
				kept += len(k) + len(v)
			}
		}
		if kept > readCacheBytes {
			return fmt.Errorf("the transaction kept %d bytes of its reads, more than %d", kept, readCacheBytes)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestScanKeptForTheTransaction: a Scan repeated in one transaction asks
// the server once, and still answers the transaction's own writes made in
// between: a put in the range joins the answer, and a delete in the range
// (which changes the query: one more row asked for) asks again and is
// answered without the deleted row.
func TestScanKeptForTheTransaction(t *testing.T) {
	name := []byte("scanned")
	e := openTestEngine(t, name)
	err := e.Update(func(tx engine.Tx) error {
		for _, k := range []string{"a/1", "a/2", "b/1"} {
			if err := tx.Bucket(name).Put([]byte(k), []byte("v"+k)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = e.Update(func(tx engine.Tx) error {
		scan := func() (string, error) {
			var got []string
			err := tx.Bucket(name).Scan(engine.Range{From: []byte("a/"), To: []byte("a0")}, func(k, v []byte) error {
				got = append(got, string(k)+"="+string(v))
				return nil
			})
			return strings.Join(got, " "), err
		}
		trips := e.Stats().RoundTrips
		for _, step := range []struct {
			write func() error
			want  string
			trips uint64
		}{
			{nil, "a/1=va/1 a/2=va/2", 1},
			{nil, "a/1=va/1 a/2=va/2", 1},
			{func() error { return tx.Bucket(name).Put([]byte("a/3"), []byte("new")) }, "a/1=va/1 a/2=va/2 a/3=new", 1},
			{func() error { return tx.Bucket(name).Delete([]byte("a/1")) }, "a/2=va/2 a/3=new", 2},
			{nil, "a/2=va/2 a/3=new", 2},
		} {
			if step.write != nil {
				if err := step.write(); err != nil {
					return err
				}
			}
			got, err := scan()
			if err != nil {
				return err
			}
			if got != step.want {
				return fmt.Errorf("scan read %q, want %q", got, step.want)
			}
			if n := e.Stats().RoundTrips - trips; n != step.trips {
				return fmt.Errorf("after %q: %d round trips, want %d", step.want, n, step.trips)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
