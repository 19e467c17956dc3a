package postgres

import (
	"bytes"
	"fmt"
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
