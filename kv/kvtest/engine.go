package kvtest

import (
	"os"
	"path/filepath"
	"testing"

	"sealbox/kv"
	"sealbox/kv/bolt"
	"sealbox/kv/pgtest"
)

// Location is where a test's store lives on the engine under test: a bbolt
// file, or a PostgreSQL schema of its own when the suites run on PostgreSQL
// (SEALBOX_TEST_PG, see kv/pgtest).
type Location struct {
	file string // the bbolt file's path, when the store is in one
	url  string // the PostgreSQL schema's URL, when the store is in one
}

// LocationIn is the location of the store of a test data directory:
// dir/sealbox.db, or, when the suites run on PostgreSQL and dir holds no
// prepared bbolt file, a schema of its own whose URL dir keeps (in
// store-url), so that a store opened on dir again finds the same schema.
func LocationIn(tb testing.TB, dir string) Location {
	tb.Helper()
	file := filepath.Join(dir, "sealbox.db")
	if _, err := os.Stat(file); err == nil || !pgtest.Enabled() {
		return Location{file: file}
	}
	kept := filepath.Join(dir, "store-url")
	if url, err := os.ReadFile(kept); err == nil {
		return Location{url: string(url)}
	}
	url := pgtest.URL(tb)
	if err := os.WriteFile(kept, []byte(url), 0o600); err != nil {
		tb.Fatal(err)
	}
	return Location{url: url}
}

// Networked reports whether several Stores may be open on the location at
// once, as on the nodes of one instance: true for a PostgreSQL schema;
// a bbolt file is held by one Store.
func (l Location) Networked() bool { return l.url != "" }

// MustOpen opens the store at l; bo applies to a bbolt file only. The
// caller closes it.
func (l Location) MustOpen(tb testing.TB, opts kv.Options, bo bolt.Options) *kv.Store {
	tb.Helper()
	var s *kv.Store
	var err error
	if l.Networked() {
		s, err = OpenPostgres(l.url, opts)
	} else {
		s, err = OpenBolt(l.file, opts, bo)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// MustOpenStore opens an empty store on the engine under test (a bbolt
// file in a temp dir, or a PostgreSQL schema of its own) whose clock is the
// Clock it returns; the store is closed when the test ends.
func MustOpenStore(tb testing.TB) (*kv.Store, *Clock) {
	tb.Helper()
	c := NewClock()
	s := LocationIn(tb, tb.TempDir()).MustOpen(tb, kv.Options{Now: c.Now}, bolt.Options{})
	tb.Cleanup(func() { s.Close() })
	return s, c
}

// TwoNodes opens the stores of two nodes of one instance, with opts, on the
// engine under test: two Stores on one PostgreSQL schema, as two processes
// would open them; on bbolt, which one process holds, one Store for both.
// They are closed when the test ends.
func TwoNodes(tb testing.TB, opts kv.Options) [2]*kv.Store {
	tb.Helper()
	loc := LocationIn(tb, tb.TempDir())
	var nodes [2]*kv.Store
	for i := range nodes {
		if i > 0 && !loc.Networked() {
			nodes[i] = nodes[0]
			break
		}
		nodes[i] = loc.MustOpen(tb, opts, bolt.Options{})
		tb.Cleanup(func() { nodes[i].Close() })
	}
	return nodes
}
