package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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
	"sealbox/server/translog"
)

// TestMain runs the suite in kv's retry test mode when
// SEALBOX_TEST_RERUN=1: every store update runs twice, the first run
// rolled back.
func TestMain(m *testing.M) {
	kv.RerunUpdatesForTests(os.Getenv("SEALBOX_TEST_RERUN") == "1")
	code := m.Run()
	pgtest.Stop()
	s3test.Stop()
	os.Exit(code)
}

// Clock is a controllable test clock: tests move time instead of sleeping.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

func NewClock() *Clock {
	return &Clock{now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
}

func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestServer is a real server on a random loopback port over a real bbolt
// file (or a PostgreSQL schema, SEALBOX_TEST_PG) and a real blob store in a
// temp dir (or a bucket of its own on a real S3 server, SEALBOX_TEST_S3).
type TestServer struct {
	*server.Server
	Store  *kv.Store
	Blobs  blobs.Engine
	Clock  *Clock
	Config server.Config
	Dir    string
}

// testArgon2 keeps password hashing fast in tests; production uses
// password.Default.
var testArgon2 = password.Params{Time: 1, MemoryKiB: 64, Threads: 1}

// NewTestConfig is the production configuration with the clock injected and
// the costly parameters made cheap.
func NewTestConfig(clock *Clock) server.Config {
	cfg := server.DefaultConfig()
	cfg.Now = clock.Now
	cfg.Argon2 = testArgon2
	// Tests sign in from one address, and in parallel, far more than people
	// would; the tests of the per-address limit and of the hashing queue
	// set their production values.
	cfg.AuthRate, cfg.AuthBurst = 1e6, 1e6
	cfg.HashQueue = 1 << 10
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

// SignCheckpoint signs a checkpoint of the log as it is now, as the
// background worker cli starts does once per interval.
func (ts *TestServer) SignCheckpoint(tb testing.TB) {
	tb.Helper()
	if _, err := translog.New(ts.Store, ts.Config.LogKey, ts.Config.WitnessQuorum).Sign(); err != nil {
		tb.Fatal(err)
	}
}

// MustOpenServer starts a server; edit, when given, adjusts its
// configuration first.
func MustOpenServer(tb testing.TB, edit ...func(*server.Config)) *TestServer {
	tb.Helper()
	return MustOpenServerIn(tb, tb.TempDir(), edit...)
}

// MustOpenServerIn is MustOpenServer over dir/sealbox.db, which may already
// hold a prepared store.
func MustOpenServerIn(tb testing.TB, dir string, edit ...func(*server.Config)) *TestServer {
	tb.Helper()
	return mustOpenServerWith(tb, dir, bolt.Options{}, edit...)
}

// mustOpenServerWith opens the store, in a bbolt file with bo (its clock is
// the test clock's).
func mustOpenServerWith(tb testing.TB, dir string, bo bolt.Options, edit ...func(*server.Config)) *TestServer {
	tb.Helper()
	clock := NewClock()
	cfg := NewTestConfig(clock)
	for _, e := range edit {
		e(&cfg)
	}
	store := mustOpenStore(tb, storeIn(tb, dir), kv.Options{Now: cfg.Now}, bo)
	engineMetrics := prometheus.NewRegistry()
	cfg.EngineMetrics = engineMetrics
	blobStore := mustOpenBlobs(tb, dir, engineMetrics)
	srv := server.New(cfg, store, blobStore)
	if err := srv.Open("127.0.0.1:0"); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Close(ctx)
		store.Close()
	})
	return &TestServer{Server: srv, Store: store, Blobs: blobStore, Clock: clock, Config: cfg, Dir: dir}
}

// mustOpenBlobs opens the blob store of a test data directory: dir/blobs,
// or, when the suite runs on S3 and dir holds no prepared blobs directory,
// a bucket of its own, whose URL dir keeps
// (in blobs-url) so that a server opened on dir again finds the same
// bucket, and which registers its series on metrics.
func mustOpenBlobs(tb testing.TB, dir string, metrics prometheus.Registerer) blobs.Engine {
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

// localBlobs returns the test server's local blob store, and skips a test
// that is about local files (their paths, modes, or bytes on disk) when
// the suite runs on S3.
func (ts *TestServer) localBlobs(tb testing.TB) *blobs.Dir {
	tb.Helper()
	s, ok := ts.Blobs.(*blobs.Dir)
	if !ok {
		tb.Skip("about the local blob store's files; the suite runs on S3")
	}
	return s
}

// storeIn is where the store of a test data directory lives: dir/sealbox.db,
// or, when the suite runs on PostgreSQL and dir holds no prepared bbolt
// file, a schema of its own, whose URL dir keeps (in store-url) so that a
// server opened on dir again finds the same store.
func storeIn(tb testing.TB, dir string) string {
	tb.Helper()
	file := filepath.Join(dir, "sealbox.db")
	if _, err := os.Stat(file); err == nil || !pgtest.Enabled() {
		return file
	}
	kept := filepath.Join(dir, "store-url")
	if url, err := os.ReadFile(kept); err == nil {
		return string(url)
	}
	url := pgtest.URL(tb)
	if err := os.WriteFile(kept, []byte(url), 0o600); err != nil {
		tb.Fatal(err)
	}
	return url
}

// mustOpenStore opens the store at where: a bbolt file's path, opened with
// bo, or the URL of a PostgreSQL schema (pgtest.URL).
func mustOpenStore(tb testing.TB, where string, opts kv.Options, bo bolt.Options) *kv.Store {
	tb.Helper()
	var store *kv.Store
	var err error
	if strings.HasPrefix(where, "postgres://") {
		store, err = kvtest.OpenPostgres(where, opts)
	} else {
		store, err = kvtest.OpenBolt(where, opts, bo)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return store
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
	store := mustOpenStore(tb, ts.Store.Path(), kv.Options{Now: ts.Config.Now}, bolt.Options{})
	srv := server.New(ts.Config, store, ts.Blobs)
	if err := srv.Open("127.0.0.1:0"); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		srv.Close(context.Background())
		store.Close()
	})
	ts.Server, ts.Store = srv, store
}

// SecondNode starts another server over ts's store and blob store, with
// the same configuration and clock: a second node of one instance. On
// PostgreSQL it opens a Store of its own on the same schema, as another
// process would; bbolt is held by one process, so the nodes share its Store.
func (ts *TestServer) SecondNode(tb testing.TB) *TestServer {
	tb.Helper()
	store := ts.Store
	if strings.HasPrefix(ts.Store.Path(), "postgres://") {
		store = mustOpenStore(tb, ts.Store.Path(), kv.Options{Now: ts.Config.Now}, bolt.Options{})
	}
	srv := server.New(ts.Config, store, ts.Blobs)
	if err := srv.Open("127.0.0.1:0"); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Close(ctx)
		if store != ts.Store {
			store.Close()
		}
	})
	return &TestServer{Server: srv, Store: store, Blobs: ts.Blobs, Clock: ts.Clock, Config: ts.Config, Dir: ts.Dir}
}

// Response is a fully read HTTP response.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a map.
func (r *Response) JSON(tb testing.TB) map[string]any {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		tb.Fatalf("body is not a JSON object: %v: %q", err, r.Body)
	}
	return m
}

// Req describes one request.
type Req struct {
	Method      string
	Path        string
	Token       string
	Body        any // string and []byte are sent as is; anything else as JSON
	ContentType string
	Header      map[string]string
}

// Do sends req and reads the whole response.
func (ts *TestServer) Do(tb testing.TB, req Req) *Response {
	tb.Helper()
	return DoAt(tb, ts.URL(), req)
}

// DoAt sends req to the server at baseURL (one not started by
// MustOpenServer, such as the built binary) and reads the whole response.
func DoAt(tb testing.TB, baseURL string, req Req) *Response {
	tb.Helper()
	var body io.Reader
	contentType := req.ContentType
	switch b := req.Body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	case []byte:
		body = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			tb.Fatal(err)
		}
		body = bytes.NewReader(raw)
	}
	if body != nil && contentType == "" {
		contentType = "application/json"
	}
	hr, err := http.NewRequest(req.Method, baseURL+req.Path, body)
	if err != nil {
		tb.Fatal(err)
	}
	if contentType != "" {
		hr.Header.Set("Content-Type", contentType)
	}
	if req.Token != "" {
		hr.Header.Set("Authorization", "Bearer "+req.Token)
	}
	for k, v := range req.Header {
		hr.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: raw}
}

// WantStatus fails unless the response has the status.
func (r *Response) WantStatus(tb testing.TB, want int) *Response {
	tb.Helper()
	if r.Status != want {
		tb.Fatalf("status: got %d, want %d; body %s", r.Status, want, r.Body)
	}
	return r
}

// WantProblem fails unless the response is a problem+json body with the
// status and code, carrying every member server/PROTOCOL.md §1 requires.
func (r *Response) WantProblem(tb testing.TB, status int, code string) map[string]any {
	tb.Helper()
	r.WantStatus(tb, status)
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		tb.Fatalf("Content-Type: got %q, want application/problem+json", ct)
	}
	p := r.JSON(tb)
	if p["code"] != code {
		tb.Fatalf("code: got %v, want %s; body %s", p["code"], code, r.Body)
	}
	if p["status"] != float64(status) {
		tb.Fatalf("status member: got %v, want %d", p["status"], status)
	}
	if p["type"] != "https://sealbox.invalid/problems/"+code {
		tb.Fatalf("type: got %v", p["type"])
	}
	for _, k := range []string{"title", "detail"} {
		if s, _ := p[k].(string); s == "" {
			tb.Fatalf("problem member %s missing: %s", k, r.Body)
		}
	}
	if status == http.StatusUnauthorized && !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), `Bearer realm="sealbox"`) {
		tb.Fatalf("401 without WWW-Authenticate: %q", r.Header.Get("WWW-Authenticate"))
	}
	return p
}

// Tokens is a token pair as the API answers it.
type Tokens struct {
	Access  string
	Refresh string
}

func tokensOf(tb testing.TB, r *Response) Tokens {
	tb.Helper()
	r.WantStatus(tb, http.StatusOK)
	m := r.JSON(tb)
	return Tokens{Access: m["access_token"].(string), Refresh: m["refresh_token"].(string)}
}

const testPassword = "correct horse battery"

// Register creates an account and returns its first token pair.
func (ts *TestServer) Register(tb testing.TB, email string) Tokens {
	tb.Helper()
	return tokensOf(tb, ts.Do(tb, Req{Method: "POST", Path: "/v1/auth/register",
		Body: map[string]any{"email": email, "password": testPassword}}))
}

// loginBody is a sign-in with the test password, with the members of extra
// added (a device_id, a user agent's fields).
func loginBody(email string, extra []map[string]any) map[string]any {
	body := map[string]any{"email": email, "password": testPassword}
	for _, e := range extra {
		maps.Copy(body, e)
	}
	return body
}

// Login signs in with the test password and expects 200.
func (ts *TestServer) Login(tb testing.TB, email string, extra ...map[string]any) Tokens {
	tb.Helper()
	return tokensOf(tb, ts.Do(tb, Req{Method: "POST", Path: "/v1/auth/login", Body: loginBody(email, extra)}))
}

// UserID returns the account id behind an access token.
func (ts *TestServer) UserID(tb testing.TB, access string) string {
	tb.Helper()
	r := ts.Do(tb, Req{Method: "GET", Path: "/v1/auth/profile", Token: access}).WantStatus(tb, 200)
	return r.JSON(tb)["user_id"].(string)
}

func ioPipe() (*io.PipeReader, *io.PipeWriter) { return io.Pipe() }

// NewAlbum provisions a fresh album for the token's account and returns its id.
func (ts *TestServer) NewAlbum(tb testing.TB, access string) string {
	tb.Helper()
	id := fmt.Sprintf("%08x-abcd-4ef0-8000-000000000000", albumSeq.Add(1))
	ts.Do(tb, Req{Method: "POST", Path: "/v1/albums", Token: access, Body: map[string]any{"album_id": id}}).WantStatus(tb, http.StatusCreated)
	return id
}

var albumSeq atomic.Uint32

// OpenUpload opens an upload session on the album and returns its id.
func (ts *TestServer) OpenUpload(tb testing.TB, access, albumID string) string {
	tb.Helper()
	r := ts.Do(tb, Req{Method: "POST", Path: "/v1/albums/" + albumID + "/uploads", Token: access}).WantStatus(tb, http.StatusCreated)
	return r.JSON(tb)["upload_id"].(string)
}

// PutBlob uploads data under its own hash through the upload session.
func (ts *TestServer) PutBlob(tb testing.TB, access, uploadID string, data []byte) *Response {
	tb.Helper()
	return ts.Do(tb, Req{Method: "PUT", Path: "/v1/uploads/" + uploadID + "/blobs/" + hashOf(data), Token: access,
		Body: data, ContentType: "application/octet-stream"})
}

// PutBlobChunked uploads data under its own hash without announcing its
// length (a MultiReader hides it, so the client sends chunks), with the
// Content-Type given ("" sends none).
func (ts *TestServer) PutBlobChunked(tb testing.TB, access, uploadID string, data []byte, contentType string) *Response {
	tb.Helper()
	req, err := http.NewRequest("PUT", ts.URL()+"/v1/uploads/"+uploadID+"/blobs/"+hashOf(data), io.MultiReader(bytes.NewReader(data)))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+access)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: body}
}

// Upload stores data as a blob held by the token's account (in a new album
// and upload session) and returns its hash.
func (ts *TestServer) Upload(tb testing.TB, access string, data []byte) string {
	tb.Helper()
	up := ts.OpenUpload(tb, access, ts.NewAlbum(tb, access))
	ts.PutBlob(tb, access, up, data).WantStatus(tb, http.StatusCreated)
	return hashOf(data)
}

func hashOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
