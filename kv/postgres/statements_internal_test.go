package postgres

import (
	"bytes"
	"testing"

	"sealbox/kv/engine"
)

// TestStatementReads: ReadOne reads a key, Follow the row an index's
// value names, and FollowBeside that row and one more, in one round trip
// each, and answer as Gets would for a key
// with no row, and for a key whose row names a missing one.
func TestStatementReads(t *testing.T) {
	index, target := []byte("index"), []byte("target")
	e := openTestEngine(t, index, target)
	put := func(bucket []byte, k, v string) {
		t.Helper()
		if _, err := e.pool.Exec(t.Context(), `INSERT INTO `+tableName(bucket)+` (k, v) VALUES ($1, $2)`, []byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	put(index, "token", "session")
	put(target, "session", "record")
	put(index, "dangling", "gone")
	for _, c := range []struct{ key, ref, value string }{ // ref: the index's value
		{"token", "session", "record"},
		{"dangling", "gone", ""},
		{"unknown", "", ""},
	} {
		before := e.Stats()
		value, err := e.Follow(index, []byte(c.key), target)
		if err != nil || !bytes.Equal(value, []byte(c.value)) || (value == nil) != (c.value == "") {
			t.Errorf("Follow(%q) = %q, %v, want %q", c.key, value, err, c.value)
		}
		if v, err := e.ReadOne(index, []byte(c.key)); err != nil || !bytes.Equal(v, []byte(c.ref)) || (v == nil) != (c.ref == "") {
			t.Errorf("ReadOne(%q) = %q, %v, want %q", c.key, v, err, c.ref)
		}
		after := e.Stats()
		if trips, reads := after.RoundTrips-before.RoundTrips, after.Reads-before.Reads; trips != 2 || reads != 2 {
			t.Errorf("Follow(%q) and ReadOne took %d round trips, %d reads; want 2, 2", c.key, trips, reads)
		}
		for _, beside := range []struct{ key, value string }{{"session", "record"}, {"missing", ""}} {
			before := e.Stats()
			followed, other, err := e.FollowBeside(index, []byte(c.key), target, engine.Key{Bucket: target, Key: []byte(beside.key)})
			if err != nil || !bytes.Equal(followed, []byte(c.value)) || (followed == nil) != (c.value == "") ||
				!bytes.Equal(other, []byte(beside.value)) || (other == nil) != (beside.value == "") {
				t.Errorf("FollowBeside(%q, beside %q) = %q, %q, %v; want %q, %q", c.key, beside.key, followed, other, err, c.value, beside.value)
			}
			if trips := e.Stats().RoundTrips - before.RoundTrips; trips != 1 {
				t.Errorf("FollowBeside(%q, beside %q) took %d round trips, want 1", c.key, beside.key, trips)
			}
		}
	}
}

// BenchmarkStatementReads: an access token's session read by a view of two
// Gets against the one statement of Follow, and a record by ReadOne:
// SEALBOX_TEST_PG=1 go test ./kv/postgres -run '^$' -bench StatementReads.
func BenchmarkStatementReads(b *testing.B) {
	index, target := []byte("index"), []byte("target")
	e := openTestEngine(b, index, target)
	for _, q := range []string{`INSERT INTO ` + tableName(index) + ` VALUES ('token', 'session')`, `INSERT INTO ` + tableName(target) + ` VALUES ('session', 'record')`} {
		if _, err := e.pool.Exec(b.Context(), q); err != nil {
			b.Fatal(err)
		}
	}
	token := []byte("token")
	b.Run("view", func(b *testing.B) {
		for b.Loop() {
			err := e.View(func(tx engine.Tx) error {
				ref, err := tx.Bucket(index).Get(token)
				if err != nil {
					return err
				}
				_, err = tx.Bucket(target).Get(ref)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("follow", func(b *testing.B) {
		for b.Loop() {
			if _, err := e.Follow(index, token, target); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read-one", func(b *testing.B) {
		for b.Loop() {
			if _, err := e.ReadOne(target, []byte("session")); err != nil {
				b.Fatal(err)
			}
		}
	})
}
