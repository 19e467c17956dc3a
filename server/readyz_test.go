package server_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/server"
)

// TestReadinessIsCached: a verdict is reused for 2 s, so probes cannot
// make the server write and delete a blob at will; the metrics listener
// answers /readyz too.
func TestReadinessIsCached(t *testing.T) {
	ts := MustOpenServer(t)
	ts.Do(t, Req{Method: "GET", Path: "/readyz"}).WantStatus(t, http.StatusOK)
	ts.Store.Close()
	ts.Clock.Advance(1999 * time.Millisecond)
	ts.Do(t, Req{Method: "GET", Path: "/readyz"}).WantStatus(t, http.StatusOK)
	ts.Clock.Advance(time.Millisecond)
	ts.Do(t, Req{Method: "GET", Path: "/readyz"}).WantProblem(t, http.StatusServiceUnavailable, "error.not_ready")

	rec := httptest.NewRecorder()
	ts.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Content-Type") != "application/problem+json" {
		t.Fatalf("/readyz on the metrics listener: got %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	rec = httptest.NewRecorder()
	ts.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: got %d", rec.Code)
	}
}

// TestReadinessShowsWitnessState: checks.witnesses names the witnesses in
// conflict and, apart, those at fault, as their state is now: a witness
// that cosigned again leaves it. The server stays ready throughout.
func TestReadinessShowsWitnessState(t *testing.T) {
	const forked, faulty = "witness.example/forked+01234567+BXXX", "witness.example/faulty+89abcdef+BXXX"
	ts := MustOpenServer(t, func(c *server.Config) { c.Witnesses = []string{forked, faulty} })
	ready := func(want string) {
		t.Helper()
		r := ts.Do(t, Req{Method: "GET", Path: "/readyz"})
		r.WantStatus(t, http.StatusOK)
		if !strings.Contains(string(r.Body), `"witnesses":"`+want+`"`) {
			t.Fatalf("/readyz: %s, want witnesses %q", r.Body, want)
		}
		ts.Clock.Advance(2 * time.Second) // past the cached verdict
	}
	ready("ok")
	set := func(vkey string, change func(*kv.WitnessState)) {
		t.Helper()
		if err := ts.Store.UpdateWitnessState(vkey, change); err != nil {
			t.Fatal(err)
		}
	}
	set(faulty, func(st *kv.WitnessState) { st.Fault = "the witness claims 9000000000000000000 records" })
	ready("fault: witness.example/faulty")
	rec := httptest.NewRecorder()
	ts.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{`sealbox_witness_fault{witness="witness.example/faulty"} 1`, `sealbox_witness_fault{witness="witness.example/forked"} 0`} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Fatalf("/metrics lacks %s", want)
		}
	}
	set(forked, func(st *kv.WitnessState) { st.Conflict = "another tree" })
	ready("conflict: witness.example/forked; fault: witness.example/faulty")
	set(faulty, func(st *kv.WitnessState) { st.Fault = "" })
	ready("conflict: witness.example/forked")
}
