package server_test

import (
	"fmt"
	"net/http"
	"path"
	"testing"
	"time"

	"sealbox/server/servertest"
)

// TestTusLockedCarriesRetryAfter: a 423 for a transfer another holder's
// lease keeps tells the client when that lease ends, rounded up to whole
// seconds, so a tus client waits that long instead of guessing.
func TestTusLockedCarriesRetryAfter(t *testing.T) {
	ts, tok, loc, data := openTransfer(t, randomData(1<<16))
	ttl := ts.Config.TusLeaseTTL
	if held, err := ts.Store.TryLease("tus/"+path.Base(loc), "killed-node/run/1", ttl); err != nil || !held {
		t.Fatalf("the killed node's lease: %v %v", held, err)
	}
	// after lets advance pass, then PATCHes the transfer and wants the
	// lease's remaining time, rounded up, in Retry-After.
	after := func(advance time.Duration, want string) servertest.Scenario {
		return servertest.Scenario{
			Name: fmt.Sprintf("after %v more", advance), Method: "PATCH", Path: loc, Token: tok.Access, Body: data,
			ContentType: "application/offset+octet-stream", Header: tusHeaders("Upload-Offset", "0"),
			WantStatus: http.StatusLocked, WantCode: "error.transfer.locked",
			Setup: func(testing.TB, *servertest.Scenario) { ts.Clock.Advance(advance) },
			Teardown: func(tb testing.TB, _ servertest.Scenario, r *Response) {
				if got := r.Header.Get("Retry-After"); got != want {
					tb.Fatalf("after %v more: Retry-After %q, want %q (the lease's remaining time, rounded up)", advance, got, want)
				}
			},
		}
	}
	for _, sc := range []servertest.Scenario{
		after(0, "30"),
		after(10*time.Second+500*time.Millisecond, "20"),
		after(19*time.Second, "1"),
	} {
		sc.Test(t, ts.Client)
	}
}
