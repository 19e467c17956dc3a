package server_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"sealbox/kv/fault"
	"sealbox/server"
)

// TestSignedInCodeChecksAreLimited: disable and verify-enrollment take at
// most 5 wrong codes per account in any 5 minutes; the 6th attempt, the
// right code included, is 429 with Retry-After until the oldest wrong code
// leaves the window, and counted as a refusal of --totp-attempts. The count
// is the account's, on every node (a second node over the same store sees
// it), not the session's.
func TestSignedInCodeChecksAreLimited(t *testing.T) {
	for _, path := range []string{"/v1/auth/totp/disable", "/v1/auth/totp/verify-enrollment"} {
		t.Run(path, func(t *testing.T) {
			ts := MustOpenServer(t)
			other := ts.SecondNode(t)
			tok, secret := ts.RegisterWithTOTP(t, "alice@example.com")
			if path == "/v1/auth/totp/verify-enrollment" {
				ts.Clock.Advance(step)
				ts.CodeReq(t, "/v1/auth/totp/disable", tok.Access, ts.Code(t, secret, 0)).WantStatus(t, http.StatusNoContent)
				secret = ts.EnrollTOTP(t, tok.Access)
			}
			ts.Clock.Advance(step)
			for i := 0; i < 5; i++ {
				node := ts
				if i%2 == 1 {
					node = other
				}
				node.CodeReq(t, path, tok.Access, ts.WrongCode(t, secret)).WantProblem(t, http.StatusForbidden, fault.ECodeInvalidCode)
				ts.Clock.Advance(30 * time.Second)
			}
			// 2m30s after the first wrong code: limited, the right code too.
			for _, node := range []*TestServer{ts, other} {
				r := node.CodeReq(t, path, tok.Access, ts.Code(t, secret, 0))
				r.WantProblem(t, http.StatusTooManyRequests, fault.ECodeRateLimited)
				if got := r.Header.Get("Retry-After"); got != "150" {
					t.Fatalf("Retry-After: got %q, want 150 (until the first wrong code leaves the window)", got)
				}
			}
			ts.WantMetric(t, `sealbox_limit_refusals_total{limit="totp-attempts"} 1`)
			// Once the first wrong code has left the window, one more
			// attempt is taken: a wrong one fills the window again.
			ts.Clock.Advance(150 * time.Second)
			ts.CodeReq(t, path, tok.Access, ts.WrongCode(t, secret)).WantProblem(t, http.StatusForbidden, fault.ECodeInvalidCode)
			ts.CodeReq(t, path, tok.Access, ts.Code(t, secret, 0)).WantProblem(t, http.StatusTooManyRequests, fault.ECodeRateLimited)
			// At the window's end, the right code works.
			ts.Clock.Advance(5 * time.Minute)
			ts.CodeReq(t, path, tok.Access, ts.Code(t, secret, 0)).WantStatus(t, http.StatusNoContent)
		})
	}
}

// TestCodeLimitFlags: the limit follows the configuration.
func TestCodeLimitFlags(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.TOTPAttempts, c.TOTPAttemptWindow = 2, time.Minute })
	tok, secret := ts.RegisterWithTOTP(t, "alice@example.com")
	ts.Clock.Advance(step)
	for i := 0; i < 2; i++ {
		ts.CodeReq(t, "/v1/auth/totp/disable", tok.Access, ts.WrongCode(t, secret)).WantProblem(t, http.StatusForbidden, fault.ECodeInvalidCode)
	}
	r := ts.CodeReq(t, "/v1/auth/totp/disable", tok.Access, ts.Code(t, secret, 0))
	r.WantProblem(t, http.StatusTooManyRequests, fault.ECodeRateLimited)
	if got := r.Header.Get("Retry-After"); got != "60" {
		t.Fatalf("Retry-After: got %q, want 60", got)
	}
	ts.Clock.Advance(time.Minute)
	ts.CodeReq(t, "/v1/auth/totp/disable", tok.Access, ts.Code(t, secret, 0)).WantStatus(t, http.StatusNoContent)
}

// TestParallelWrongCodesStopAtTheLimit: wrong codes sent at once, half to
// each of two nodes, are checked and counted one transaction at a time:
// exactly 5 are checked (403), the rest refused (429).
func TestParallelWrongCodesStopAtTheLimit(t *testing.T) {
	ts := MustOpenServer(t)
	other := ts.SecondNode(t)
	tok, secret := ts.RegisterWithTOTP(t, "alice@example.com")
	ts.Clock.Advance(step)
	wrong := ts.WrongCode(t, secret)
	const n = 16
	statuses := make(chan int, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		node := ts
		if i%2 == 1 {
			node = other
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses <- node.CodeReq(t, "/v1/auth/totp/disable", tok.Access, wrong).Status
		}()
	}
	wg.Wait()
	close(statuses)
	count := map[int]int{}
	for s := range statuses {
		count[s]++
	}
	if count[http.StatusForbidden] != 5 || count[http.StatusTooManyRequests] != n-5 {
		t.Fatalf("statuses: %v; want 5 of 403 and %d of 429", count, n-5)
	}
}
