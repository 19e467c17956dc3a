package server_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"sealbox/server"
	"sealbox/server/servertest"
)

// issueCode asks for an enrollment code and returns both spellings.
func (ts *TestServer) issueCode(tb testing.TB, access string) (code, fallback string) {
	tb.Helper()
	m := ts.Do(tb, Req{Method: "POST", Path: "/v1/auth/devices/enroll", Token: access}).WantStatus(tb, 200).JSON(tb)
	return m["code"].(string), m["text_fallback"].(string)
}

// redeem presents a code from the client address addr ("" for the TCP peer).
func (ts *TestServer) redeem(tb testing.TB, code, addr string) *Response {
	tb.Helper()
	req := Req{Method: "POST", Path: "/v1/auth/devices/enroll/redeem", Body: map[string]any{"code": code}}
	if addr != "" {
		req.Header = map[string]string{"X-Forwarded-For": addr}
	}
	return ts.Do(tb, req)
}

// openChannel issues a code with access and redeems it.
func (ts *TestServer) openChannel(tb testing.TB, access string) string {
	tb.Helper()
	code, _ := ts.issueCode(tb, access)
	return ts.redeem(tb, code, "").WantStatus(tb, 200).JSON(tb)["channel_id"].(string)
}

func channelPath(ch string) string { return "/v1/auth/devices/enroll/channel/" + ch }

func (ts *TestServer) post(tb testing.TB, ch, dir, payload string) *Response {
	tb.Helper()
	return ts.Do(tb, Req{Method: "POST", Path: channelPath(ch), Body: map[string]any{"direction": dir, "payload": payload}})
}

func (ts *TestServer) drain(tb testing.TB, ch, dir string) []string {
	tb.Helper()
	m := ts.Do(tb, Req{Method: "GET", Path: channelPath(ch) + "?direction=" + dir}).WantStatus(tb, 200).JSON(tb)
	raw, ok := m["payloads"].([]any)
	if !ok {
		tb.Fatalf("payloads is not an array: %v", m)
	}
	out := make([]string, len(raw))
	for i, p := range raw {
		out[i] = p.(string)
	}
	return out
}

func TestEnrollmentCodeShape(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	seen := map[string]bool{}
	for i := 0; i < 20; i++ {
		m := ts.Do(t, Req{Method: "POST", Path: "/v1/auth/devices/enroll", Token: tok.Access}).WantStatus(t, 200).JSON(t)
		code, fallback := m["code"].(string), m["text_fallback"].(string)
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(code, "sbx_en_"))
		if !strings.HasPrefix(code, "sbx_en_") || err != nil || len(raw) != 32 {
			t.Fatalf("code %q is not sbx_en_ and 256 bits of base64url", code)
		}
		if len(fallback) != 12 || strings.Trim(fallback, "0123456789") != "" {
			t.Fatalf("text_fallback %q is not 12 digits", fallback)
		}
		if m["expires_at"] != "2026-11-22T10:10:00Z" {
			t.Fatalf("expires_at: %v", m["expires_at"])
		}
		if seen[code] || seen[fallback] {
			t.Fatal("a spelling repeated")
		}
		seen[code], seen[fallback] = true, true
	}
}

func TestEnrollmentFreshnessGate(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	enroll := func(access string) *Response {
		return ts.Do(t, Req{Method: "POST", Path: "/v1/auth/devices/enroll", Token: access})
	}
	ts.Clock.Advance(10*time.Minute - time.Second)
	enroll(tok.Access).WantStatus(t, 200)
	ts.Clock.Advance(time.Second)
	enroll(tok.Access).WantProblem(t, 403, "error.auth.reauth_required")
	// Refresh does not renew the presentation time.
	next := servertest.TokensOf(t, ts.Do(t, Req{Method: "POST", Path: "/v1/auth/refresh", Body: map[string]any{"refresh_token": tok.Refresh}}))
	enroll(next.Access).WantProblem(t, 403, "error.auth.reauth_required")
	// Reauthenticate does.
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/reauthenticate", Token: next.Access, Body: map[string]any{"password": servertest.Password}}).WantStatus(t, 200)
	enroll(next.Access).WantStatus(t, 200)
	ts.Do(t, Req{Method: "POST", Path: "/v1/auth/devices/enroll"}).WantProblem(t, 401, "error.auth.unauthenticated")
}

func TestRedeemEitherSpellingOnce(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	for _, byFallback := range []bool{false, true} {
		t.Run(fmt.Sprintf("fallback=%v", byFallback), func(t *testing.T) {
			code, fallback := ts.issueCode(t, tok.Access)
			first, second := code, fallback
			if byFallback {
				first, second = fallback, code
			}
			m := ts.redeem(t, first, "").WantStatus(t, 200).JSON(t)
			if ch := m["channel_id"].(string); !strings.HasPrefix(ch, "sbx_rl_") || len(ch) != len("sbx_rl_")+43 {
				t.Fatalf("channel_id shape: %q", ch)
			}
			if m["expires_at"] != "2026-11-22T10:15:00Z" {
				t.Fatalf("expires_at: %v", m["expires_at"])
			}
			// Both spellings were spent together.
			ts.redeem(t, first, "").WantProblem(t, 404, "error.enrollment.code_refused")
			ts.redeem(t, second, "").WantProblem(t, 404, "error.enrollment.code_refused")
		})
	}
}

// TestFallbackNotGuessableFromDatabase: a copy of the database alone must
// not yield a working fallback code. Its 10^12 space is small enough to
// hash completely, so neither the digits nor their SHA-256 may be in the
// file; the code still redeems.
func TestFallbackNotGuessableFromDatabase(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	_, fallback := ts.issueCode(t, tok.Access)
	raw := ts.RawStore(t)
	sum := sha256.Sum256([]byte(fallback))
	if bytes.Contains(raw, []byte(fallback)) || bytes.Contains(raw, sum[:]) {
		t.Fatal("the database file holds the fallback or its bare SHA-256")
	}
	ts.redeem(t, fallback, "").WantStatus(t, 200)
}

func TestRedeemRefusals(t *testing.T) {
	ts := MustOpenServer(t)
	cases := []servertest.Scenario{
		{Name: "unknown code", Body: map[string]any{"code": "sbx_en_never-issued"}, WantStatus: 404, WantCode: "error.enrollment.code_refused"},
		{Name: "unknown fallback", Body: map[string]any{"code": "000000000000"}, WantStatus: 404, WantCode: "error.enrollment.code_refused"},
		{Name: "empty code", Body: map[string]any{"code": ""}, WantStatus: 404, WantCode: "error.enrollment.code_refused"},
		{Name: "long code", Body: map[string]any{"code": strings.Repeat("x", 129)}, WantStatus: 404, WantCode: "error.enrollment.code_refused"},
		{Name: "missing code", Body: map[string]any{}, WantStatus: 422, WantCode: "error.request.invalid"},
		{Name: "code of the wrong type", Body: map[string]any{"code": 123456789012}, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "unknown key", Body: map[string]any{"code": "x", "account": "y"}, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "wrong content type", Body: `{"code":"x"}`, ContentType: "text/plain", WantStatus: 415, WantCode: "error.request.unsupported_media_type"},
	}
	for _, sc := range cases {
		sc.Method, sc.Path = "POST", "/v1/auth/devices/enroll/redeem"
		t.Run(sc.Name, func(t *testing.T) { sc.Test(t, ts.Client) })
	}
}

func TestEnrollmentCodeExpires(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	code, fallback := ts.issueCode(t, tok.Access)
	code2, _ := ts.issueCode(t, tok.Access)
	ts.Clock.Advance(10*time.Minute - time.Second)
	ts.redeem(t, code2, "").WantStatus(t, 200)
	ts.Clock.Advance(time.Second)
	ts.redeem(t, code, "").WantProblem(t, 404, "error.enrollment.code_refused")
	ts.redeem(t, fallback, "").WantProblem(t, 404, "error.enrollment.code_refused")
	// The sweeper removes the expired code; it stays refused.
	if _, err := ts.Store.Sweep(); err != nil {
		t.Fatal(err)
	}
	ts.redeem(t, code, "").WantProblem(t, 404, "error.enrollment.code_refused")
}

func TestRedeemRateLimitPerAddress(t *testing.T) {
	// The 12 channels opened below are more than the per-account cap,
	// which is not under test here.
	ts := MustOpenServer(t, func(c *server.Config) { c.TrustProxy = true; c.RelayChannels = 20 })
	tok := ts.Register(t, "a@example.org")
	code, _ := ts.issueCode(t, tok.Access)
	// Successful redemptions do not count.
	for i := 0; i < 12; i++ {
		ts.redeem(t, ts.mustCode(t, tok.Access), "198.51.100.7").WantStatus(t, 200)
	}
	for i := 0; i < 10; i++ {
		ts.Clock.Advance(time.Second)
		ts.redeem(t, fmt.Sprintf("sbx_en_guess%d", i), "198.51.100.7").WantProblem(t, 404, "error.enrollment.code_refused")
	}
	// The 11th attempt is refused before the code is looked at, even a good one.
	r := ts.redeem(t, code, "198.51.100.7")
	r.WantProblem(t, 429, "error.rate_limited")
	// The first refusal was at +1s; it leaves the 10-minute window at +10m1s.
	if got := r.Header.Get("Retry-After"); got != "591" {
		t.Fatalf("Retry-After: got %q, want 591", got)
	}
	// Another address is not affected.
	ts.redeem(t, "sbx_en_other", "198.51.100.8").WantProblem(t, 404, "error.enrollment.code_refused")
	ts.Clock.Advance(590 * time.Second)
	ts.redeem(t, code, "198.51.100.7").WantProblem(t, 429, "error.rate_limited")
	ts.Clock.Advance(time.Second)
	// The oldest refusal has left the window: one more attempt is admitted.
	// (The first code has expired by now, so a new one is used.)
	ts.redeem(t, ts.mustCode(t, ts.Login(t, "a@example.org").Access), "198.51.100.7").WantStatus(t, 200)
}

// mustCode issues a code and returns its full spelling.
func (ts *TestServer) mustCode(tb testing.TB, access string) string {
	code, _ := ts.issueCode(tb, access)
	return code
}

func TestRedeemRateLimitFallbackGlobal(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.TrustProxy = true })
	tok := ts.Register(t, "a@example.org")
	code, fallback := ts.issueCode(t, tok.Access)
	// 100 refused fallback guesses from 100 addresses: each address is far
	// below its own limit.
	for i := 0; i < 100; i++ {
		ts.redeem(t, fmt.Sprintf("%012d", i), fmt.Sprintf("203.0.113.%d", i)).WantProblem(t, 404, "error.enrollment.code_refused")
	}
	r := ts.redeem(t, fallback, "198.51.100.1")
	r.WantProblem(t, 429, "error.rate_limited")
	if r.Header.Get("Retry-After") != "600" {
		t.Fatalf("Retry-After: got %q", r.Header.Get("Retry-After"))
	}
	// Full codes still work, and the 429 was not counted against the address.
	ts.redeem(t, code, "198.51.100.1").WantStatus(t, 200)
	ts.Clock.Advance(10 * time.Minute)
	_, fallback2 := ts.issueCode(t, ts.Login(t, "a@example.org").Access)
	ts.redeem(t, fallback2, "198.51.100.1").WantStatus(t, 200)
}

func TestRelayMailboxes(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	ch := ts.openChannel(t, tok.Access)
	for _, p := range []string{"one", "two", "three"} {
		ts.post(t, ch, "to_initiator", p).WantStatus(t, 204)
	}
	ts.post(t, ch, "to_enrollee", "hello enrollee").WantStatus(t, 204)
	// Draining one direction leaves the other untouched; a payload is
	// delivered once.
	if got := ts.drain(t, ch, "to_initiator"); strings.Join(got, ",") != "one,two,three" {
		t.Fatalf("to_initiator: got %q", got)
	}
	if got := ts.drain(t, ch, "to_initiator"); len(got) != 0 {
		t.Fatalf("second drain: got %q, want none", got)
	}
	ts.post(t, ch, "to_initiator", "four").WantStatus(t, 204)
	if got := ts.drain(t, ch, "to_enrollee"); len(got) != 1 || got[0] != "hello enrollee" {
		t.Fatalf("to_enrollee: got %q", got)
	}
	if got := ts.drain(t, ch, "to_initiator"); len(got) != 1 || got[0] != "four" {
		t.Fatalf("to_initiator after more: got %q", got)
	}
	// The empty answer is an empty array, not null.
	r := ts.Do(t, Req{Method: "GET", Path: channelPath(ch) + "?direction=to_enrollee"}).WantStatus(t, 200)
	if string(r.Body) != `{"payloads":[]}` {
		t.Fatalf("empty drain: %s", r.Body)
	}
}

func TestRelayRefusals(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	ch := ts.openChannel(t, tok.Access)
	full := ts.openChannel(t, tok.Access)
	for i := 0; i < 64; i++ {
		ts.post(t, full, "to_enrollee", fmt.Sprint(i)).WantStatus(t, 204)
	}
	max := strings.Repeat("p", 64<<10)
	ts.post(t, ch, "to_initiator", max).WantStatus(t, 204)
	cases := []servertest.Scenario{
		{Name: "direction outside the enum", Method: "POST", Path: channelPath(ch), Body: map[string]any{"direction": "to_server", "payload": "x"}, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "direction of the wrong type", Method: "POST", Path: channelPath(ch), Body: map[string]any{"direction": 1, "payload": "x"}, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "direction missing", Method: "POST", Path: channelPath(ch), Body: map[string]any{"payload": "x"}, WantStatus: 422, WantCode: "error.request.invalid"},
		{Name: "payload missing", Method: "POST", Path: channelPath(ch), Body: map[string]any{"direction": "to_initiator"}, WantStatus: 422, WantCode: "error.request.invalid"},
		{Name: "payload empty", Method: "POST", Path: channelPath(ch), Body: map[string]any{"direction": "to_initiator", "payload": ""}, WantStatus: 422, WantCode: "error.request.invalid"},
		{Name: "payload over 64 KiB", Method: "POST", Path: channelPath(ch), Body: map[string]any{"direction": "to_initiator", "payload": max + "p"}, WantStatus: 422, WantCode: "error.request.invalid"},
		{Name: "payload not text", Method: "POST", Path: channelPath(ch), Body: map[string]any{"direction": "to_initiator", "payload": []int{1}}, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "unknown key", Method: "POST", Path: channelPath(ch), Body: map[string]any{"direction": "to_initiator", "payload": "x", "x": 1}, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "mailbox full", Method: "POST", Path: channelPath(full), Body: map[string]any{"direction": "to_enrollee", "payload": "x"}, WantStatus: 422, WantCode: "error.relay.mailbox_full"},
		{Name: "post to an unknown channel", Method: "POST", Path: channelPath("sbx_rl_unknown"), Body: map[string]any{"direction": "to_enrollee", "payload": "x"}, WantStatus: 404, WantCode: "error.relay.channel_not_found"},
		{Name: "post to a handle no channel can have", Method: "POST", Path: channelPath("x"), Body: map[string]any{"direction": "to_enrollee", "payload": "x"}, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "drain without direction", Method: "GET", Path: channelPath(ch), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "drain with direction outside the enum", Method: "GET", Path: channelPath(ch) + "?direction=both", WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "drain an unknown channel", Method: "GET", Path: channelPath("sbx_rl_unknown") + "?direction=to_enrollee", WantStatus: 404, WantCode: "error.relay.channel_not_found"},
		{Name: "close without a token", Method: "DELETE", Path: channelPath(ch), WantStatus: 401, WantCode: "error.auth.unauthenticated"},
	}
	servertest.RunScenarios(t, ts.Client, cases)
	// The full mailbox's other direction still takes payloads, and draining
	// frees the full one.
	ts.post(t, full, "to_initiator", "x").WantStatus(t, 204)
	if got := ts.drain(t, full, "to_enrollee"); len(got) != 64 || got[0] != "0" || got[63] != "63" {
		t.Fatalf("drained %d payloads", len(got))
	}
	ts.post(t, full, "to_enrollee", "x").WantStatus(t, 204)
	if got := ts.drain(t, ch, "to_initiator"); len(got) != 1 || got[0] != max {
		t.Fatal("the 64 KiB payload did not come back whole")
	}
}

func TestRelayCloseOnlyByInitiator(t *testing.T) {
	ts := MustOpenServer(t)
	owner := ts.Register(t, "a@example.org")
	stranger := ts.Register(t, "b@example.org")
	ch := ts.openChannel(t, owner.Access)
	ts.post(t, ch, "to_initiator", "secret").WantStatus(t, 204)

	foreign := ts.Do(t, Req{Method: "DELETE", Path: channelPath(ch), Token: stranger.Access})
	foreign.WantProblem(t, 404, "error.relay.channel_not_found")
	unknown := ts.Do(t, Req{Method: "DELETE", Path: channelPath("sbx_rl_unknown"), Token: stranger.Access})
	unknown.WantProblem(t, 404, "error.relay.channel_not_found")
	if string(foreign.Body) != string(unknown.Body) {
		t.Fatalf("a foreign channel is distinguishable from an unknown one:\n%s\n%s", foreign.Body, unknown.Body)
	}
	// The stranger's attempt changed nothing.
	if got := ts.drain(t, ch, "to_initiator"); len(got) != 1 {
		t.Fatalf("after a foreign close: %q", got)
	}
	ts.post(t, ch, "to_initiator", "again").WantStatus(t, 204)
	ts.Do(t, Req{Method: "DELETE", Path: channelPath(ch), Token: owner.Access}).WantStatus(t, 204)
	ts.post(t, ch, "to_initiator", "x").WantProblem(t, 404, "error.relay.channel_not_found")
	ts.Do(t, Req{Method: "GET", Path: channelPath(ch) + "?direction=to_initiator"}).WantProblem(t, 404, "error.relay.channel_not_found")
	ts.Do(t, Req{Method: "DELETE", Path: channelPath(ch), Token: owner.Access}).WantProblem(t, 404, "error.relay.channel_not_found")
}

func TestRelayChannelExpires(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	ch := ts.openChannel(t, tok.Access)
	ts.post(t, ch, "to_enrollee", "x").WantStatus(t, 204)
	ts.Clock.Advance(15*time.Minute - time.Second)
	ts.post(t, ch, "to_enrollee", "y").WantStatus(t, 204)
	ts.Clock.Advance(time.Second)
	ts.post(t, ch, "to_enrollee", "z").WantProblem(t, 404, "error.relay.channel_not_found")
	ts.Do(t, Req{Method: "GET", Path: channelPath(ch) + "?direction=to_enrollee"}).WantProblem(t, 404, "error.relay.channel_not_found")
	ts.Do(t, Req{Method: "DELETE", Path: channelPath(ch), Token: ts.Login(t, "a@example.org").Access}).WantProblem(t, 404, "error.relay.channel_not_found")
	// The sweeper drops the channel and its mailboxes.
	if _, err := ts.Store.Sweep(); err != nil {
		t.Fatal(err)
	}
	ts.post(t, ch, "to_enrollee", "z").WantProblem(t, 404, "error.relay.channel_not_found")
}

// Channels and mailboxes live in the store: a restart loses nothing.
func TestRelaySurvivesRestart(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	ch := ts.openChannel(t, tok.Access)
	ts.post(t, ch, "to_enrollee", "before the restart").WantStatus(t, 204)
	code, _ := ts.issueCode(t, tok.Access)

	ts.Restart(t)

	if got := ts.drain(t, ch, "to_enrollee"); len(got) != 1 || got[0] != "before the restart" {
		t.Fatalf("after the restart: %q", got)
	}
	ts.redeem(t, code, "").WantStatus(t, 200)
}

// BenchmarkRelayRoundTrip: one relay round trip (POST a payload, then drain
// it with GET) over HTTP through the full stack, run with b.RunParallel, one
// channel per goroutine. Each iteration is two requests and two bbolt write
// transactions; compare with BenchmarkAuthenticatedGET from the same run
// (one request, one read transaction).
func BenchmarkRelayRoundTrip(b *testing.B) {
	ts := MustOpenServer(b)
	tok := ts.Register(b, "bench@example.org")
	payload := strings.Repeat("p", 1024)
	body := `{"direction":"to_enrollee","payload":"` + payload + `"}`
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ch := ts.openChannel(b, tok.Access)
		url := ts.URL() + channelPath(ch)
		for pb.Next() {
			resp, err := benchClient.Post(url, "application/json", strings.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				b.Fatalf("post: status %d", resp.StatusCode)
			}
			resp, err = benchClient.Get(url + "?direction=to_enrollee")
			if err != nil {
				b.Fatal(err)
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || n < int64(len(payload)) {
				b.Fatalf("drain: status %d, %d bytes", resp.StatusCode, n)
			}
		}
	})
}

// TestRelayAccountCaps: an account may have --relay-channels channels open
// and --relay-bytes payload bytes waiting in all of them. Beyond either, 429
// with Retry-After (the wait until one of its channels expires) and a code
// naming the cap, counted under the flag's name; the refused code is not
// spent, another account is not affected, and closing a channel or
// draining a mailbox makes room at once.
func TestRelayAccountCaps(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.RelayChannels = 3; c.RelayBytes = 192 << 10 })
	alice := ts.Register(t, "alice@example.org")
	bob := ts.Register(t, "bob@example.org")
	var chans []string
	for range 3 {
		chans = append(chans, ts.openChannel(t, alice.Access))
		ts.Clock.Advance(time.Minute)
	}
	code, _ := ts.issueCode(t, alice.Access)
	r := ts.redeem(t, code, "")
	r.WantProblem(t, 429, "error.limit.relay_channels")
	// The first channel expires 12 minutes from now.
	if got := r.Header.Get("Retry-After"); got != "720" {
		t.Fatalf("Retry-After %q, want 720", got)
	}
	ts.openChannel(t, bob.Access)
	ts.Do(t, Req{Method: "DELETE", Path: channelPath(chans[0]), Token: alice.Access}).WantStatus(t, 204)
	chans[0] = ts.redeem(t, code, "").WantStatus(t, 200).JSON(t)["channel_id"].(string)
	ts.WantMetric(t, `sealbox_limit_refusals_total{limit="relay-channels"} 1`)

	payload := strings.Repeat("p", 64<<10)
	ts.post(t, chans[0], "to_enrollee", payload).WantStatus(t, 204)
	ts.post(t, chans[1], "to_initiator", payload).WantStatus(t, 204)
	ts.post(t, chans[2], "to_enrollee", payload).WantStatus(t, 204)
	r = ts.post(t, chans[1], "to_enrollee", "x")
	r.WantProblem(t, 429, "error.limit.relay_bytes")
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("a relay-bytes refusal without Retry-After")
	}
	ts.WantMetric(t, `sealbox_limit_refusals_total{limit="relay-bytes"} 1`)
	if got := ts.drain(t, chans[1], "to_enrollee"); len(got) != 0 {
		t.Fatalf("the refused payload was stored: %d payloads", len(got))
	}
	if got := ts.drain(t, chans[1], "to_initiator"); len(got) != 1 {
		t.Fatalf("drained %d payloads, want 1", len(got))
	}
	ts.post(t, chans[1], "to_enrollee", "fits again").WantStatus(t, 204)
}

// enrollChannel is the initiator's request for the channel its code
// opened.
func enrollChannel(code, token string) Req {
	return Req{Method: "POST", Path: "/v1/auth/enroll/channel", Body: map[string]any{"code": code}, Token: token}
}

// TestEnrollChannelForInitiator: the issuing account finds the channel its
// code opened (server/PROTOCOL.md §17), whichever spelling was redeemed; it
// is 404 before the redeem, for another account (byte for byte as for an
// unknown code), after a close and after the channel expired.
func TestEnrollChannelForInitiator(t *testing.T) {
	ts := MustOpenServer(t)
	owner := ts.Register(t, "a@example.org")
	stranger := ts.Register(t, "b@example.org")
	code, fallback := ts.issueCode(t, owner.Access)

	before := ts.Do(t, enrollChannel(code, owner.Access))
	if p := before.WantProblem(t, 404, "error.relay.channel_not_found"); p["detail"] != "channel not found" {
		t.Fatalf("detail before the redeem: %v", p["detail"])
	}
	redeemed := ts.redeem(t, fallback, "").WantStatus(t, 200).JSON(t)
	got := ts.Do(t, enrollChannel(code, owner.Access)).WantStatus(t, 200).JSON(t)
	if got["channel_id"] != redeemed["channel_id"] || got["expires_at"] != redeemed["expires_at"] || len(got) != 2 {
		t.Fatalf("the initiator's channel %v, the redeemer's %v", got, redeemed)
	}
	ch := got["channel_id"].(string)
	ts.post(t, ch, "to_enrollee", "hello").WantStatus(t, 204)
	if got := ts.drain(t, ch, "to_enrollee"); len(got) != 1 || got[0] != "hello" {
		t.Fatalf("drained %q", got)
	}

	foreign := ts.Do(t, enrollChannel(code, stranger.Access))
	foreign.WantProblem(t, 404, "error.relay.channel_not_found")
	unknown := ts.Do(t, enrollChannel("sbx_en_unknown", owner.Access))
	unknown.WantProblem(t, 404, "error.relay.channel_not_found")
	if !bytes.Equal(foreign.Body, unknown.Body) || !bytes.Equal(before.Body, unknown.Body) {
		t.Fatalf("answers differ:\n%s\n%s\n%s", foreign.Body, unknown.Body, before.Body)
	}
	// The fallback is the redeemer's spelling; the issuer asks with the code.
	ts.Do(t, enrollChannel(fallback, owner.Access)).WantProblem(t, 404, "error.relay.channel_not_found")
	servertest.RunScenarios(t, ts.Client, []servertest.Scenario{
		{Name: "no code", Method: "POST", Path: "/v1/auth/enroll/channel", Body: map[string]any{}, Token: owner.Access, WantStatus: 422, WantCode: "error.request.invalid", WantField: "code"},
		{Name: "a code of another type", Method: "POST", Path: "/v1/auth/enroll/channel", Body: map[string]any{"code": 7}, Token: owner.Access, WantStatus: 400, WantCode: "error.request.malformed", WantField: "code"},
		{Name: "an unknown member", Method: "POST", Path: "/v1/auth/enroll/channel", Body: map[string]any{"code": code, "x": 1}, Token: owner.Access, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "no token", Method: "POST", Path: "/v1/auth/enroll/channel", Body: map[string]any{"code": code}, WantStatus: 401, WantCode: "error.auth.unauthenticated"},
	})

	// A second code's channel is another one, and expires with it.
	code2 := ts.mustCode(t, owner.Access)
	ch2 := ts.redeem(t, code2, "").WantStatus(t, 200).JSON(t)["channel_id"].(string)
	if ch2 == ch {
		t.Fatal("two codes opened the same channel")
	}
	ts.Do(t, Req{Method: "DELETE", Path: channelPath(ch), Token: owner.Access}).WantStatus(t, 204)
	ts.Do(t, enrollChannel(code, owner.Access)).WantProblem(t, 404, "error.relay.channel_not_found")
	ts.Do(t, enrollChannel(code2, owner.Access)).WantStatus(t, 200)
	ts.Clock.Advance(15 * time.Minute)
	ts.Do(t, enrollChannel(code2, ts.Login(t, "a@example.org").Access)).WantProblem(t, 404, "error.relay.channel_not_found")
}
