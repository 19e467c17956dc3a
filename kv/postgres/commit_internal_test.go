package postgres

import (
	"bytes"
	"fmt"
	"testing"

	"sealbox/kv/engine"
)

// TestCommitWritesEachTable: a commit stores a table's rows in one
// statement: new rows, rows that replace stored ones (ON CONFLICT), empty
// values, and deletes beside them, as a statement a row would.
func TestCommitWritesEachTable(t *testing.T) {
	name := []byte("rows")
	e := openTestEngine(t, name)
	write := func(puts map[string]string, deletes ...string) {
		t.Helper()
		err := e.Update(func(tx engine.Tx) error {
			for k, v := range puts {
				if err := tx.Bucket(name).Put([]byte(k), []byte(v)); err != nil {
					return err
				}
			}
			for _, k := range deletes {
				if err := tx.Bucket(name).Delete([]byte(k)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	write(map[string]string{"one": "1", "two": "2", "three": "3"})
	write(map[string]string{"one": "uno", "three": "", "four": "4"}, "two")
	want := map[string][]byte{"one": []byte("uno"), "two": nil, "three": {}, "four": []byte("4")}
	err := e.View(func(tx engine.Tx) error {
		for k, w := range want {
			v, err := tx.Bucket(name).Get([]byte(k))
			if err != nil {
				return err
			}
			if !bytes.Equal(v, w) || (v == nil) != (w == nil) {
				return fmt.Errorf("%s reads %q, want %q", k, v, w)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
