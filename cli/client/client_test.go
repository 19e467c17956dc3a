package client_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sealbox/blobs/s3test"
	"sealbox/cli/client"
	"sealbox/cli/sealed"
	"sealbox/kv/fault"
	"sealbox/kv/pgtest"
	"sealbox/server"
	"sealbox/server/servertest"
)

// The client is tested against real servers (servertest: bbolt and files,
// or PostgreSQL and S3 with SEALBOX_TEST_PG and SEALBOX_TEST_S3), never a
// fake: the answers it parses are the server's own.
func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	s3test.Stop()
	os.Exit(code)
}

var ctx = context.Background()

// newClient is a client of ts whose waits between tries are recorded and
// cut to 25 ms: long enough for the server to finish with a request the
// client gave up on (a cut body still holds its transfer's lease for that
// long), never the seconds a Retry-After asks for.
func newClient(tb testing.TB, base string) (*client.Client, *[]time.Duration) {
	tb.Helper()
	c, err := client.New(base, nil)
	if err != nil {
		tb.Fatal(err)
	}
	var waits []time.Duration
	var mu sync.Mutex
	c.Sleep = func(_ context.Context, d time.Duration) error {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
		time.Sleep(min(d, 25*time.Millisecond))
		return nil
	}
	return c, &waits
}

func hashOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func bytesContent(b []byte) client.Content {
	return func() (io.Reader, error) { return bytes.NewReader(b), nil }
}

// TestSignInAndErrors: register, sign in and out; a refusal is an *Error
// with the server's code, matched by errors.Is, and said in words.
func TestSignInAndErrors(t *testing.T) {
	ts := servertest.MustOpenServer(t)
	c, _ := newClient(t, ts.URL())
	var saved []client.Tokens
	c.OnTokens = func(tok client.Tokens) { saved = append(saved, tok) }
	tok, err := c.Register(ctx, "alice@example.org", servertest.Password, "")
	if err != nil || !strings.HasPrefix(tok.Access, "sbx_at_") || tok.Refresh == "" {
		t.Fatalf("register: %+v, %v", tok, err)
	}
	p, err := c.Profile(ctx)
	if err != nil || p.Email != "alice@example.org" || p.UserID == "" {
		t.Fatalf("profile: %+v, %v", p, err)
	}
	if _, err := c.Register(ctx, "alice@example.org", servertest.Password, ""); !errors.Is(err, &client.Error{Code: fault.ECodeAccountExists}) {
		t.Fatalf("a second registration: %v", err)
	}
	_, ch, err := c.Login(ctx, "alice@example.org", "a wrong password", "")
	var e *client.Error
	if ch != nil || !errors.As(err, &e) || e.Status != http.StatusUnauthorized || e.Code != fault.ECodeInvalidCredentials {
		t.Fatalf("a wrong password: %v", err)
	}
	if msg := err.Error(); strings.Contains(msg, "error.") || !strings.Contains(msg, "email or password is wrong") {
		t.Fatalf("the refusal is not said in words: %q", msg)
	}
	tok2, ch, err := c.Login(ctx, "alice@example.org", servertest.Password, "7d1c2b9e-3d4a-4e5f-8a7b-1c2d3e4f5a6b")
	if err != nil || ch != nil || tok2.Access == tok.Access {
		t.Fatalf("login: %+v %v %v", tok2, ch, err)
	}
	if len(saved) != 2 || saved[1] != tok2 {
		t.Fatalf("OnTokens saw %d pairs, want the registration's and the login's", len(saved))
	}
	if err := c.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	if c.Tokens() != (client.Tokens{}) {
		t.Fatal("logout kept the tokens")
	}
	if _, err := c.Profile(ctx); client.CodeOf(err) != fault.ECodeUnauthenticated {
		t.Fatalf("signed out: %v", err)
	}
	if _, err := client.New("example.org", nil); err == nil {
		t.Fatal("an address without a scheme was taken")
	}
}

// TestRefresh: an expired access token is refreshed once and the request
// sent again; requests racing on the expiry refresh it once (a refresh
// token presented twice would end the session). A session past its
// refresh lifetime answers ErrSignedOut.
func TestRefresh(t *testing.T) {
	ts := servertest.MustOpenServer(t)
	c, _ := newClient(t, ts.URL())
	var refreshes atomic.Int32
	c.OnTokens = func(client.Tokens) { refreshes.Add(1) }
	if _, err := c.Register(ctx, "bob@example.org", servertest.Password, ""); err != nil {
		t.Fatal(err)
	}
	before := c.Tokens()
	ts.Clock.Advance(16 * time.Minute)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := c.Profile(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := refreshes.Load(); got != 2 {
		t.Fatalf("%d token pairs kept, want the registration's and one refresh", got)
	}
	if after := c.Tokens(); after.Access == before.Access || after.Refresh == before.Refresh {
		t.Fatal("the tokens were not replaced")
	}
	ts.Clock.Advance(31 * 24 * time.Hour)
	if _, err := c.Profile(ctx); !errors.Is(err, client.ErrSignedOut) || client.CodeOf(err) != fault.ECodeSessionExpired {
		t.Fatalf("past the refresh lifetime: %v", err)
	}
}

// TestBlobs: a blob put twice is created once; the owner reads it back
// whole and as a range; a blob the account does not hold is refused with
// error.blob.not_found.
func TestBlobs(t *testing.T) {
	ts := servertest.MustOpenServer(t)
	c, _ := newClient(t, ts.URL())
	if _, err := c.Register(ctx, "carol@example.org", servertest.Password, ""); err != nil {
		t.Fatal(err)
	}
	album := "0b6c5d2e-1a3f-4e8b-9c7d-2f1e0a9b8c7d"
	if v, err := c.ProvisionAlbum(ctx, album); err != nil || v == "" {
		t.Fatalf("provision: %q %v", v, err)
	}
	up, err := c.OpenUpload(ctx, album)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("sealed chunk "), 10_000)
	hash := hashOf(data)
	for i, want := range []bool{true, false} {
		if created, err := c.PutBlob(ctx, up, hash, int64(len(data)), bytesContent(data)); err != nil || created != want {
			t.Fatalf("put %d: created %v, %v; want %v", i, created, err, want)
		}
	}
	for _, tc := range []struct{ offset, length int64 }{{0, -1}, {100, 50}, {int64(len(data)) - 3, -1}, {7, 0}} {
		r, err := c.ReadBlob(ctx, hash, tc.offset, tc.length)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(r)
		r.Close()
		want := data[tc.offset:]
		if tc.length >= 0 {
			want = want[:tc.length]
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("read %d+%d: %d bytes, not the blob's", tc.offset, tc.length, len(got))
		}
	}
	if _, err := c.ReadBlob(ctx, hash, int64(len(data))+10, 5); err == nil {
		t.Fatal("a range past the end was read")
	}
	if _, err := c.ReadBlob(ctx, hashOf([]byte("never stored")), 0, -1); client.CodeOf(err) != fault.ECodeBlobNotFound {
		t.Fatalf("an unknown blob: %v", err)
	}
	if _, err := c.PutBlob(ctx, up, hashOf([]byte("other")), int64(len(data)), bytesContent(data)); client.CodeOf(err) != fault.ECodeHashMismatch {
		t.Fatalf("a blob under another hash: %v", err)
	}
	if err := c.CloseUpload(ctx, up); err != nil {
		t.Fatal(err)
	}
	if albums, err := c.Albums(ctx); err != nil || len(albums) != 1 || albums[0].AlbumID != album {
		t.Fatalf("albums: %+v %v", albums, err)
	}
}

// failingContent reads like data but fails once, after cut bytes, on its
// first open: a connection lost mid-upload.
func failingContent(data []byte, cut int) client.Content {
	var opened atomic.Int32
	return func() (io.Reader, error) {
		if opened.Add(1) == 1 {
			return io.MultiReader(bytes.NewReader(data[:cut]), errReader{}), nil
		}
		return bytes.NewReader(data), nil
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("the network went away") }

// TestTusResume: a transfer cut off mid-body resumes from the offset the
// server acknowledged, also from a second client that has only its
// location (a later run), and the blob read back is the one sent.
func TestTusResume(t *testing.T) {
	ts := servertest.MustOpenServer(t)
	c, waits := newClient(t, ts.URL())
	if _, err := c.Register(ctx, "dave@example.org", servertest.Password, ""); err != nil {
		t.Fatal(err)
	}
	album := "1c7d6e3f-2b4a-4f9c-8d8e-3a2f1b0c9d8e"
	if _, err := c.ProvisionAlbum(ctx, album); err != nil {
		t.Fatal(err)
	}
	up, err := c.OpenUpload(ctx, album)
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("a sealed video chunk "), 50_000)
	hash := hashOf(data)
	loc, err := c.TusCreate(ctx, up, hash, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.TusUpload(ctx, loc, hash, int64(len(data)), failingContent(data, 300_000)); err != nil {
		t.Fatalf("the resumed transfer: %v", err)
	}
	if len(*waits) == 0 {
		t.Fatal("the cut transfer was not retried")
	}
	got, err := c.ReadBlob(ctx, hash, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(got)
	got.Close()
	if !bytes.Equal(b, data) {
		t.Fatal("the blob read back is not the one sent")
	}

	// A later run knows only the location: it resumes where the server is.
	part := hashOf(data[:400_000])
	loc, err = c.TusCreate(ctx, up, part, 400_000)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.TusUpload(ctx, loc, part, 400_000, func() (io.Reader, error) {
		return io.MultiReader(bytes.NewReader(data[:123_456]), errReader{}), nil
	}); err == nil {
		t.Fatal("a transfer whose content always fails succeeded")
	}
	later, _ := newClient(t, ts.URL())
	later.SetTokens(c.Tokens())
	// What reached the server of the cut bodies is acknowledged, at most
	// what was sent (how much arrived depends on the transport's buffers).
	if off, err := later.TusOffset(ctx, loc); err != nil || off > 123_456 {
		t.Fatalf("the acknowledged offset: %d, %v", off, err)
	}
	if err := later.TusUpload(ctx, loc, part, 400_000, bytesContent(data[:400_000])); err != nil {
		t.Fatal(err)
	}
	if r, err := later.ReadBlob(ctx, part, 0, -1); err != nil {
		t.Fatal(err)
	} else if b, _ := io.ReadAll(r); !bytes.Equal(b, data[:400_000]) {
		t.Fatal("the resumed blob is not the one sent")
	}
	if _, err := later.TusOffset(ctx, loc); client.CodeOf(err) != fault.ECodeTransferNotFound {
		t.Fatalf("a completed transfer: %v", err)
	}
	// Its last answer lost, a transfer is found gone: the blob is held,
	// so the upload is done.
	if err := later.TusUpload(ctx, loc, part, 400_000, bytesContent(data[:400_000])); err != nil {
		t.Fatalf("a transfer completed before: %v", err)
	}
	if held, err := later.Holds(ctx, hashOf([]byte("never sent"))); err != nil || held {
		t.Fatalf("a blob never sent: held %v, %v", held, err)
	}
}

// TestRetries: behind a proxy that answers 503 (Retry-After 2) or drops the
// connection for the first tries, a retryable request is sent again after
// the server's wait or the backoff, and goes through; a registration is
// never sent twice; after Attempts tries the client gives up, saying so.
func TestRetries(t *testing.T) {
	ts := servertest.MustOpenServer(t)
	target, _ := url.Parse(ts.URL())
	proxy := httputil.NewSingleHostReverseProxy(target)
	var failures atomic.Int32
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n := failures.Add(-1); {
		case n >= 0 && n%2 == 0:
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusServiceUnavailable)
		case n >= 0:
			// A broken answer, which net/http's transport does not
			// retry by itself as it does a connection closed unanswered.
			hj, _ := w.(http.Hijacker)
			conn, _, _ := hj.Hijack()
			conn.Write([]byte("not HTTP\r\n\r\n"))
			conn.Close()
		default:
			proxy.ServeHTTP(w, r)
		}
	}))
	defer front.Close()
	c, waits := newClient(t, front.URL)
	c.Retry = client.Retry{Attempts: 5, Initial: time.Second, Max: 4 * time.Second}

	failures.Store(1)
	if _, err := c.Register(ctx, "erin@example.org", servertest.Password, ""); err == nil || len(*waits) != 0 {
		t.Fatalf("a registration through a failing server: %v after %d waits; want a failure without a retry", err, len(*waits))
	}
	if _, err := c.Register(ctx, "erin@example.org", servertest.Password, ""); err != nil {
		t.Fatal(err)
	}
	failures.Store(4)
	if _, err := c.Profile(ctx); err != nil {
		t.Fatalf("a read after four failures: %v", err)
	}
	want := []time.Duration{time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second}
	if len(*waits) != 4 || (*waits)[0] != want[0] || (*waits)[1] != want[1] || (*waits)[3] != want[3] {
		t.Fatalf("waits %v, want the backoff for a dropped connection and Retry-After for a 503: %v", *waits, want)
	}
	failures.Store(10)
	_, err := c.Profile(ctx)
	if err == nil || !strings.Contains(err.Error(), "gave up after 5 tries") {
		t.Fatalf("past the attempts: %v", err)
	}
}

// TestAssetsAndOps: an op applied, sent again after a lost answer (a
// replay), then the album's assets and feed as a second device reads them.
func TestAssetsAndOps(t *testing.T) {
	ts := servertest.MustOpenServer(t, func(c *server.Config) { c.AlbumProtocol = "2026-01-01" })
	c, _ := newClient(t, ts.URL())
	if _, err := c.Register(ctx, "frank@example.org", servertest.Password, ""); err != nil {
		t.Fatal(err)
	}
	p, err := c.Profile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	album := "2d8e7f40-3c5b-4a0d-9e9f-4b3a2c1d0e9f"
	version, err := c.ProvisionAlbum(ctx, album)
	if err != nil {
		t.Fatal(err)
	}
	up, err := c.OpenUpload(ctx, album)
	if err != nil {
		t.Fatal(err)
	}
	original := []byte("a sealed original")
	if _, err := c.PutBlob(ctx, up, hashOf(original), int64(len(original)), bytesContent(original)); err != nil {
		t.Fatal(err)
	}
	metadata := []byte("a sealed metadata blob")
	metadataHash := hashOf(metadata)
	op := client.Op{
		ManifestEnvelope: sealed.Envelope{
			CryptoSuiteID: 1, ProtocolVersion: version, AlbumID: album, FileID: "3e9f8051-4d6c-4b1e-8f0a-5c4b3d2e1f0a",
			CiphertextHash: hashOf(original), PlaintextSize: 17, ChunkSize: 65536, KeyMode: "derived",
			MetadataBlobHash: &metadataHash, CreatedByUser: p.UserID, CreatedByDevice: "7d1c2b9e-3d4a-4e5f-8a7b-1c2d3e4f5a6b",
			ClientVersion: "sealbox-test/1", Timestamp: "2026-11-22T10:00:00Z", Action: "create",
		},
		ManifestCBOR: []byte("\xa1\x61n\x61m"),
		MetadataBlob: metadata,
	}
	for i, replayed := range []bool{false, true} {
		r, err := c.ApplyOp(ctx, album, op)
		if err != nil || r.Replayed != replayed || r.SyncSeq != 1 || r.AssetID != op.ManifestEnvelope.FileID {
			t.Fatalf("op %d: %+v, %v", i, r, err)
		}
	}
	assets, feedAfter, err := c.AllAssets(ctx, album)
	if err != nil || len(assets) != 1 || feedAfter != 1 || assets[0].MetadataBlobHash != hashOf(metadata) || assets[0].ManifestHash != hashOf(op.ManifestCBOR) {
		t.Fatalf("assets: %+v, %d, %v", assets, feedAfter, err)
	}
	page, err := c.Feed(ctx, album, feedAfter, 0)
	if err != nil || len(page.Entries) != 0 || page.HasMore {
		t.Fatalf("the feed after the assets: %+v %v", page, err)
	}
}

// TestUploadRate: with an upload rate, the bodies of uploads running at
// once are paced together: the last of 600 KiB sent at 100 KiB/s waits
// five seconds (the first second's bytes go at once). The test's clock
// stands still, so every wait is counted from the same instant.
func TestUploadRate(t *testing.T) {
	ts := servertest.MustOpenServer(t)
	c, waits := newClient(t, ts.URL())
	if _, err := c.Register(ctx, "grace@example.org", servertest.Password, ""); err != nil {
		t.Fatal(err)
	}
	album := "4f0a9162-5e7d-4c2f-8b1a-6d5c4e3f2a1b"
	if _, err := c.ProvisionAlbum(ctx, album); err != nil {
		t.Fatal(err)
	}
	up, err := c.OpenUpload(ctx, album)
	if err != nil {
		t.Fatal(err)
	}
	c.SetUploadRate(100 << 10)
	still := time.Now()
	c.SetClock(func() time.Time { return still })
	var wg sync.WaitGroup
	for i := range 3 {
		data := bytes.Repeat([]byte{byte(i)}, 200<<10)
		wg.Go(func() {
			if _, err := c.PutBlob(ctx, up, hashOf(data), int64(len(data)), bytesContent(data)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	var longest time.Duration
	for _, w := range *waits {
		longest = max(longest, w)
	}
	if longest < 4900*time.Millisecond || longest > 5100*time.Millisecond {
		t.Fatalf("the last bytes waited %v, want 5s", longest)
	}
}

// TestReady: a serving server is ready; one that is gone did not answer,
// asked once whatever the retries (a probe is not retried).
func TestReady(t *testing.T) {
	ts := servertest.MustOpenServer(t)
	c, waits := newClient(t, ts.URL())
	if err := c.Ready(ctx); err != nil {
		t.Fatalf("a serving server: %v", err)
	}
	ts.Server.Close(ctx)
	var ne *client.NetError
	if err := c.Ready(ctx); !errors.As(err, &ne) || len(*waits) != 0 {
		t.Fatalf("a server that is gone: %v after %d waits, want a NetError at once", err, len(*waits))
	}
}

// TestTransparency: the log's key and its (empty) checkpoint read back as
// the server serves them; an entry bundle the log is too small for is a 404
// *Error (the audit reads the log's size from them; its tests read tiles
// of a log that holds records).
func TestTransparency(t *testing.T) {
	ts := servertest.MustOpenServer(t)
	c, _ := newClient(t, ts.URL())
	key, err := c.TransparencyKey(ctx)
	if err != nil || !strings.HasPrefix(string(key), "sealbox") {
		t.Fatalf("the log's key: %q, %v", key, err)
	}
	var refused *client.Error
	if _, err := c.TransparencyTile(ctx, "entries/000.p/200"); !errors.As(err, &refused) || refused.Status != http.StatusNotFound {
		t.Fatalf("an entry bundle past the log's end: %v", err)
	}
	ts.SignCheckpoint(t)
	origin, _, _ := strings.Cut(string(key), "+")
	cp, err := c.Checkpoint(ctx)
	if err != nil || !strings.HasPrefix(string(cp), origin+"\n0\n") {
		t.Fatalf("the checkpoint: %q, %v", cp, err)
	}
}
