package server_test

import (
	"net/http"
	"path"
	"testing"
	"time"
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
	for _, step := range []struct {
		advance time.Duration
		want    string
	}{
		{0, "30"},
		{10*time.Second + 500*time.Millisecond, "20"},
		{19 * time.Second, "1"},
	} {
		ts.Clock.Advance(step.advance)
		r := ts.TusPatch(t, tok.Access, loc, 0, data)
		r.WantProblem(t, http.StatusLocked, "error.transfer.locked")
		if got := r.Header.Get("Retry-After"); got != step.want {
			t.Fatalf("after %v more: Retry-After %q, want %q (the lease's remaining time, rounded up)", step.advance, got, step.want)
		}
	}
}
