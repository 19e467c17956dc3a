// Package servertest runs real sealbox servers for the tests of server and
// cli: a server on a random loopback port over a real store and blob store
// on the engines under test (see kv/kvtest, kv/pgtest and blobs/s3test),
// one HTTP Client, and Scenario, the row of a table-driven HTTP test. It is
// imported by tests only, never by the binary.
package servertest

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"sealbox/server/translog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sealbox/blobs"
	"sealbox/blobs/s3"
	"sealbox/blobs/s3test"
	"sealbox/kv"
	"sealbox/kv/bolt"
	"sealbox/kv/kvtest"
	"sealbox/kv/pgtest"
	"sealbox/server"
	"sealbox/server/password"
)

// TestServer is a real server on a random loopback port over a real bbolt
// file (or a PostgreSQL schema, SEALBOX_TEST_PG) and a real blob store in a
// temp dir (or a bucket of its own on a real S3 server, SEALBOX_TEST_S3).
// Its Client sends requests to it.
type TestServer struct {
	*server.Server
	Client
	Store  *kv.Store
	Blobs  blobs.Engine
	Clock  *kvtest.Clock
	Config server.Config
	Dir    string

	location kvtest.Location
}

// Argon2 keeps password hashing fast in tests; production uses
// password.Default.
var Argon2 = password.Params{Time: 1, MemoryKiB: 64, Threads: 1}

// NewTestConfig is the production configuration with the clock injected and
// the costly parameters made cheap.
func NewTestConfig(clock *kvtest.Clock) server.Config {
	cfg := server.DefaultConfig()
	cfg.Now = clock.Now
	cfg.Argon2 = Argon2
	// Tests sign in from one address, and in parallel, far more than people
	// would; the test of the per-address limit sets its production values.
	cfg.AuthRate, cfg.AuthBurst = 1e6, 1e6
	cfg.SealKey = make([]byte, 32)
	rand.Read(cfg.SealKey)
	cfg.LogKey = NewLogKey("sealbox/test")
	return cfg
}

// NewLogKey makes a transparency log key named origin.
func NewLogKey(origin string) translog.Key {
	key, err := translog.NewKey(rand.Reader, origin)
	if err != nil {
		panic(err)
	}
	return key
}

// MustOpenServer starts a server; edit, when given, adjusts its
// configuration first. It is closed when the test ends.
func MustOpenServer(tb testing.TB, edit ...func(*server.Config)) *TestServer {
	tb.Helper()
	return MustOpenServerIn(tb, tb.TempDir(), edit...)
}

// MustOpenServerIn is MustOpenServer over dir/sealbox.db, which may already
// hold a prepared store.
func MustOpenServerIn(tb testing.TB, dir string, edit ...func(*server.Config)) *TestServer {
	tb.Helper()
	return MustOpenServerWith(tb, dir, bolt.Options{}, edit...)
}

// MustOpenServerWith is MustOpenServerIn with bbolt options of the test's
// own (they apply when the store is a bbolt file).
func MustOpenServerWith(tb testing.TB, dir string, bo bolt.Options, edit ...func(*server.Config)) *TestServer {
	tb.Helper()
	clock := kvtest.NewClock()
	cfg := NewTestConfig(clock)
	for _, e := range edit {
		e(&cfg)
	}
	location := kvtest.LocationIn(tb, dir)
	store := location.MustOpen(tb, kv.Options{Now: cfg.Now}, bo)
	tb.Cleanup(func() { store.Close() }) // after the server's close
	engineMetrics := prometheus.NewRegistry()
	cfg.EngineMetrics = engineMetrics
	blobStore := MustOpenBlobs(tb, dir, engineMetrics)
	srv := mustStart(tb, cfg, store, blobStore)
	return &TestServer{Server: srv, Client: Client{BaseURL: srv.URL()}, Store: store, Blobs: blobStore,
		Clock: clock, Config: cfg, Dir: dir, location: location}
}

// mustStart starts a server on store and blobStore, closed when the test
// ends.
func mustStart(tb testing.TB, cfg server.Config, store *kv.Store, blobStore blobs.Engine) *server.Server {
	tb.Helper()
	srv := server.New(cfg, store, blobStore)
	if err := srv.Open("127.0.0.1:0"); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Close(ctx)
	})
	return srv
}

// MustOpenBlobs opens the blob store of a test data directory: dir/blobs,
// or, when the suite runs on S3 and dir holds no prepared blobs directory,
// a bucket of its own, whose URL dir keeps (in blobs-url) so that a server
// opened on dir again finds the same bucket, and which registers its series
// on metrics.
func MustOpenBlobs(tb testing.TB, dir string, metrics prometheus.Registerer) blobs.Engine {
	tb.Helper()
	if _, err := os.Stat(filepath.Join(dir, "blobs")); err == nil || !s3test.Enabled() {
		s, err := blobs.Open(filepath.Join(dir, "blobs"))
		if err != nil {
			tb.Fatal(err)
		}
		return s
	}
	file := filepath.Join(dir, "blobs-url")
	raw, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		raw = []byte(s3test.URL(tb))
		err = os.WriteFile(file, raw, 0o600)
	}
	if err != nil {
		tb.Fatal(err)
	}
	s, err := s3.Open(context.Background(), string(raw), s3.Options{Metrics: metrics})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// LocalBlobs returns the test server's local blob store, and skips a test
// that is about local files (their paths, modes, or bytes on disk) when
// the suite runs on S3.
func (ts *TestServer) LocalBlobs(tb testing.TB) *blobs.Dir {
	tb.Helper()
	s, ok := ts.Blobs.(*blobs.Dir)
	if !ok {
		tb.Skip("about the local blob store's files; the suite runs on S3")
	}
	return s
}

// SignCheckpoint signs a checkpoint of the log as it is now, as the
// background worker cli starts does once per interval.
func (ts *TestServer) SignCheckpoint(tb testing.TB) {
	tb.Helper()
	if _, err := translog.New(ts.Store, ts.Config.LogKey, ts.Config.WitnessQuorum).Sign(); err != nil {
		tb.Fatal(err)
	}
}

// RawStore is every byte the store holds, as a copy of the database would
// show them: a snapshot of the bbolt file, or every key and value of the
// PostgreSQL schema.
func (ts *TestServer) RawStore(tb testing.TB) []byte {
	tb.Helper()
	if raw := pgtest.Dump(tb, ts.Store.Path()); raw != nil {
		return raw
	}
	var snap bytes.Buffer
	if _, err := ts.Store.WriteSnapshot(&snap); err != nil {
		tb.Fatal(err)
	}
	return snap.Bytes()
}

// Restart closes the server and its store and opens them again on the same
// data directory, configuration and clock: what survives is what was
// durably stored.
func (ts *TestServer) Restart(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ts.Server.Close(ctx); err != nil {
		tb.Fatal(err)
	}
	if err := ts.Store.Close(); err != nil {
		tb.Fatal(err)
	}
	store := ts.location.MustOpen(tb, kv.Options{Now: ts.Config.Now}, bolt.Options{})
	tb.Cleanup(func() { store.Close() })
	srv := mustStart(tb, ts.Config, store, ts.Blobs)
	ts.Server, ts.Store, ts.Client.BaseURL = srv, store, srv.URL()
}

// SecondNode starts another server over ts's store and blob store, with
// the same configuration and clock: a second node of one instance. On
// PostgreSQL it opens a Store of its own on the same schema, as another
// process would; bbolt is held by one process, so the nodes share its Store.
func (ts *TestServer) SecondNode(tb testing.TB) *TestServer {
	tb.Helper()
	store := ts.Store
	if ts.location.Networked() {
		store = ts.location.MustOpen(tb, kv.Options{Now: ts.Config.Now}, bolt.Options{})
		tb.Cleanup(func() { store.Close() })
	}
	return ts.Node(mustStart(tb, ts.Config, store, ts.Blobs), store, ts.Blobs)
}

// Node is another node beside ts: srv, started by the caller over store and
// blobStore, with ts's configuration, clock and data directory.
func (ts *TestServer) Node(srv *server.Server, store *kv.Store, blobStore blobs.Engine) *TestServer {
	return &TestServer{Server: srv, Client: Client{BaseURL: srv.URL(), HTTP: ts.HTTP}, Store: store, Blobs: blobStore,
		Clock: ts.Clock, Config: ts.Config, Dir: ts.Dir, location: ts.location}
}
