package server_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
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
