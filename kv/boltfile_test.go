package kv_test

import (
	"testing"

	"sealbox/kv/bolt"
	"sealbox/kv/engine"
)

// writeBoltFile writes buckets (name to keys to values) into the bbolt file
// at path, creating the file and any missing bucket: a file as something
// other than this sealbox wrote it (an older version, a newer one).
func writeBoltFile(t *testing.T, path string, buckets map[string]map[string]string) {
	t.Helper()
	e, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var names [][]byte
	for name := range buckets {
		names = append(names, []byte(name))
	}
	if err := e.CreateBuckets(names); err != nil {
		t.Fatal(err)
	}
	err = e.Update(func(tx engine.Tx) error {
		for name, pairs := range buckets {
			b := tx.Bucket([]byte(name))
			for k, v := range pairs {
				if err := b.Put([]byte(k), []byte(v)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
