package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sealbox/blobs/s3"
	"sealbox/server"
	"sealbox/server/servertest"
)

func TestHealthAndReadiness(t *testing.T) {
	ts := MustOpenServer(t)
	if got := ts.Do(t, Req{Method: "GET", Path: "/healthz"}).WantStatus(t, 200).JSON(t)["status"]; got != "ok" {
		t.Fatalf("healthz: %v", got)
	}
	ready := ts.Do(t, Req{Method: "GET", Path: "/readyz"}).WantStatus(t, 200).JSON(t)
	if ready["status"] != "ready" {
		t.Fatalf("readyz: %v", ready)
	}
	ts.Store.Close()
	ts.Clock.Advance(2 * time.Second) // past the cached verdict
	p := ts.Do(t, Req{Method: "GET", Path: "/readyz"}).WantProblem(t, 503, "error.not_ready")
	if checks, _ := p["checks"].(map[string]any); checks["store"] != "unavailable" {
		t.Fatalf("readyz with a closed store: %v", p)
	}
}

// TestReadinessNeedsWritableBlobs: issue 8.6 makes a writable blobs
// directory part of readiness; without it every upload would fail.
func TestReadinessNeedsWritableBlobs(t *testing.T) {
	for _, tc := range []struct {
		name          string
		spoil, repair func(tmp string) error
		skipUnderRoot bool
	}{
		{
			name:   "read-only",
			spoil:  func(tmp string) error { return os.Chmod(tmp, 0o500) },
			repair: func(tmp string) error { return os.Chmod(tmp, 0o700) },
			// Root ignores modes.
			skipUnderRoot: true,
		},
		{
			// Refuses root too: a temp file cannot be made in a file.
			name: "not a directory",
			spoil: func(tmp string) error {
				if err := os.Remove(tmp); err != nil {
					return err
				}
				return os.WriteFile(tmp, nil, 0o600)
			},
			repair: func(tmp string) error {
				if err := os.Remove(tmp); err != nil {
					return err
				}
				return os.Mkdir(tmp, 0o700)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.skipUnderRoot && os.Geteuid() == 0 {
				t.Skip("root ignores file modes")
			}
			ts := MustOpenServer(t)
			tmp := filepath.Join(ts.LocalBlobs(t).Path(), "tmp")
			ready := ts.Do(t, Req{Method: "GET", Path: "/readyz"}).WantStatus(t, 200).JSON(t)
			if checks, _ := ready["checks"].(map[string]any); checks["blobs"] != "ok" {
				t.Fatalf("readyz: %v", ready)
			}
			if err := tc.spoil(tmp); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tc.repair(tmp) })
			ts.Clock.Advance(2 * time.Second) // past the cached verdict
			p := ts.Do(t, Req{Method: "GET", Path: "/readyz"}).WantProblem(t, 503, "error.not_ready")
			checks, _ := p["checks"].(map[string]any)
			if checks["blobs"] != "unwritable" || checks["store"] != "ok" || checks["disk"] != "ok" {
				t.Fatalf("readyz with unwritable blobs: %v", p)
			}
			if err := tc.repair(tmp); err != nil {
				t.Fatal(err)
			}
			ts.Clock.Advance(2 * time.Second)
			ts.Do(t, Req{Method: "GET", Path: "/readyz"}).WantStatus(t, 200)
		})
	}
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Lines() []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

func TestAuthFailuresAreLoggedWithoutSecretsAndCounted(t *testing.T) {
	logs := &syncBuffer{}
	ts := MustOpenServer(t, func(c *server.Config) { c.Log = zerolog.New(logs) })
	ts.Register(t, "a@example.org")
	secret := "Sup3rSecretGuess"
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/login", Body: map[string]any{"email": "a@example.org", "password": secret}}).
		WantProblem(t, 401, "error.auth.invalid_credentials")
	var failure map[string]any
	for _, l := range logs.Lines() {
		if l["event"] == "auth_failure" {
			failure = l
		}
	}
	if failure == nil || failure["reason"] != "invalid_credentials" || failure["client"] != "127.0.0.1" || failure["route"] != "/v1/auth/login" {
		t.Fatalf("no structured auth failure line: %v", logs.Lines())
	}
	logs.mu.Lock()
	all := logs.buf.String()
	logs.mu.Unlock()
	if strings.Contains(all, secret) || strings.Contains(all, "a@example.org") {
		t.Fatal("a log line holds what the caller presented")
	}
	// One blob held by two accounts counts once.
	data := bytes.Repeat([]byte{7}, 1234)
	ts.Upload(t, ts.Login(t, "a@example.org").Access, data)
	ts.Upload(t, ts.Register(t, "b@example.org").Access, data)
	rec := httptest.NewRecorder()
	ts.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`sealbox_auth_failures_total{reason="invalid_credentials"} 1`,
		`sealbox_http_requests_total{listener="main",method="POST",route="/v1/auth/login",status="401"} 1`,
		`sealbox_http_request_duration_seconds_count{listener="main",method="POST",route="/v1/auth/login",status="401"} 1`,
		`sealbox_store_bytes`,
		"sealbox_blob_bytes 1234\n",
		"sealbox_blobs 1\n",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// WantMetric fails the test unless the server's metrics hold each line (a
// whole series with its value, or a prefix of one).
func (ts *TestServer) WantMetric(t testing.TB, lines ...string) {
	t.Helper()
	rec := httptest.NewRecorder()
	ts.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range lines {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// TestRateLimitedAttemptsAreLogged: a guesser held at a rate limit keeps
// guessing, and issue 8.6 wants every failed second-factor and redeem attempt
// logged for fail2ban-style tools, so the 429s of a burned second-factor
// challenge and of redemption over its limit are auth_failure lines too,
// holding neither the code nor the token presented.
func TestRateLimitedAttemptsAreLogged(t *testing.T) {
	logs := &syncBuffer{}
	ts := MustOpenServer(t, func(c *server.Config) { c.Log = zerolog.New(logs); c.TrustProxy = true })
	_, secret := ts.RegisterWithTOTP(t, "a@example.org")
	ts.Clock.Advance(step)
	mfa := ts.LoginChallenge(t, "a@example.org")
	for range 5 {
		ts.VerifyTOTP(t, mfa, ts.WrongCode(t, secret)).WantStatus(t, http.StatusUnauthorized)
	}
	code := ts.Code(t, secret, 0)
	ts.VerifyTOTP(t, mfa, code).WantProblem(t, http.StatusTooManyRequests, "error.rate_limited")

	// Ten refused redemptions from one address, then the limit.
	guesses := make([]string, 11)
	for i := range guesses {
		guesses[i] = fmt.Sprintf("sbx_en_guess%02d", i)
		r := ts.redeem(t, guesses[i], "198.51.100.7")
		if i < 10 {
			r.WantProblem(t, http.StatusNotFound, "error.enrollment.code_refused")
		} else {
			r.WantProblem(t, http.StatusTooManyRequests, "error.rate_limited")
		}
	}

	want := map[string]string{"challenge_burned": "127.0.0.1", "redeem_rate_limited": "198.51.100.7"}
	for _, l := range logs.Lines() {
		if l["event"] != "auth_failure" {
			continue
		}
		raw, _ := json.Marshal(l)
		for _, presented := range append([]string{mfa, code}, guesses...) {
			if strings.Contains(string(raw), presented) {
				t.Errorf("an auth_failure line holds %q: %s", presented, raw)
			}
		}
		reason, _ := l["reason"].(string)
		if addr, ok := want[reason]; ok && l["client"] == addr {
			delete(want, reason)
		}
	}
	if len(want) != 0 {
		t.Fatalf("no auth_failure line for %v: %v", want, logs.Lines())
	}
	rec := httptest.NewRecorder()
	ts.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`sealbox_auth_failures_total{reason="challenge_burned"} 1`,
		`sealbox_auth_failures_total{reason="redeem_rate_limited"} 1`,
		`sealbox_rate_limited_total{route="/v1/auth/login/verify-totp"} 1`,
		`sealbox_rate_limited_total{route="/v1/auth/devices/enroll/redeem"} 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// The access log names route patterns: a share link's id (a capability)
// and the tokens in a request never reach it.
func TestLogsNeverHoldShareIDsOrTokens(t *testing.T) {
	logs := &syncBuffer{}
	ts := MustOpenServer(t, func(c *server.Config) { c.Log = zerolog.New(logs) })
	tok := ts.Register(t, "a@example.org")
	link := ts.newLink(t, tok.Access)
	for _, p := range []string{"/s/" + link.id, "/s/" + link.id + "/blob/" + servertest.HashOf(link.content), "/s/" + link.id + "/wrapped-secret"} {
		ts.Do(t, Req{Method: "GET", Path: p}).WantStatus(t, 200)
	}
	routes := map[any]bool{}
	for _, l := range logs.Lines() {
		routes[l["route"]] = true
	}
	for _, want := range []string{"/s/:opaque_id", "/s/:opaque_id/blob/:hash", "/s/:opaque_id/wrapped-secret"} {
		if !routes[want] {
			t.Errorf("no access-log line names the route %s: %v", want, routes)
		}
	}
	logs.mu.Lock()
	all := logs.buf.String()
	logs.mu.Unlock()
	for _, secret := range []string{link.id, tok.Access, tok.Refresh} {
		if strings.Contains(all, secret) {
			t.Errorf("the log holds %q", secret)
		}
	}
}

// TestArbitraryMethodsShareOneMetricSeries: net/http accepts any token as
// a method; each distinct method must not become a metric series of its
// own (memory for the life of the process, from unauthenticated requests).
func TestArbitraryMethodsShareOneMetricSeries(t *testing.T) {
	ts := MustOpenServer(t)
	for i := range 20 {
		req, _ := http.NewRequest(fmt.Sprintf("X%dQUERY", i), ts.URL()+"/v1/version", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("method X%dQUERY: status %d, want 405", i, resp.StatusCode)
		}
	}
	rec := httptest.NewRecorder()
	ts.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	if strings.Contains(string(body), "QUERY") {
		t.Fatal("a request method of the client's choosing became a metric label")
	}
	if want := `sealbox_http_requests_total{listener="main",method="other",route="unmatched",status="405"} 20`; !strings.Contains(string(body), want) {
		t.Fatalf("metrics lack %q", want)
	}
}

// TestStoreEngineMetrics: on PostgreSQL the metrics show the store's pool
// and count transactions retried after a conflict, here forced by writers
// racing to rewrite one account's record (a profile change, which is not
// committed in a batch as uploads and leases are, so racing ones conflict);
// on bbolt, which has neither, there are no such series.
func TestStoreEngineMetrics(t *testing.T) {
	ts := MustOpenServer(t)
	scrape := func() string {
		rec := httptest.NewRecorder()
		ts.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		body, _ := io.ReadAll(rec.Body)
		return string(body)
	}
	if _, ok := ts.Store.EngineStats(); !ok {
		if body := scrape(); strings.Contains(body, "sealbox_store_pool_connections") || strings.Contains(body, "sealbox_store_tx_retries_total") {
			t.Fatal("engine series on an engine without figures")
		}
		return
	}
	accountID := ts.UserID(t, ts.Register(t, "contended@example.org").Access)
	for round := 0; ; round++ {
		if st, _ := ts.Store.EngineStats(); st.TxRetries > 0 {
			break
		}
		if round == 200 {
			t.Fatal("200 rounds of 8 racing writers never conflicted")
		}
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				name := fmt.Sprint(round, "/", i)
				if _, err := ts.Store.SetDisplayName(accountID, &name); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	body := scrape()
	for _, want := range []string{
		`sealbox_store_pool_connections{state="acquired"}`,
		`sealbox_store_pool_connections{state="idle"}`,
		`sealbox_store_pool_connections{state="total"}`,
		`sealbox_store_pool_connections{state="max"}`,
		"sealbox_store_round_trips_total ",
		"sealbox_store_reads_total ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	m := regexp.MustCompile(`(?m)^sealbox_store_tx_retries_total (\d+)$`).FindStringSubmatch(body)
	if m == nil || m[1] == "0" {
		t.Fatalf("retries after a forced conflict: %v", m)
	}
}

// TestBlobRequestMetrics: on S3 the metrics show the latency of the blob
// engine's requests by operation and outcome, labelled with no key or
// bucket; on local files there is no such series.
func TestBlobRequestMetrics(t *testing.T) {
	// No blob is kept inline, so the put below is a request to the engine.
	ts := MustOpenServer(t, func(c *server.Config) { c.InlineMax = 0 })
	tok := ts.Register(t, "s3metrics@example.org")
	data := []byte("a blob whose put the metrics see")
	ts.Upload(t, tok.Access, data)
	rec := httptest.NewRecorder()
	ts.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	if _, onS3 := ts.Blobs.(*s3.Engine); !onS3 {
		if strings.Contains(body, "sealbox_s3_request_duration_seconds") {
			t.Fatal("S3 series on local files")
		}
		return
	}
	if want := `sealbox_s3_request_duration_seconds_count{op="PutObject",outcome="ok"}`; !strings.Contains(body, want) {
		t.Fatalf("metrics lack %q", want)
	}
	if strings.Contains(body, servertest.HashOf(data)) {
		t.Fatal("a blob's hash is in a metric label")
	}
}
