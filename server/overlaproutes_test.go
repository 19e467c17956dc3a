package server_test

import (
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// TestOverlappingRoutes: every route below /v1/auth/devices, the ones
// registered as overlapping (DELETE :session_id beside DELETE
// enroll/channel/:channel_id, which httprouter cannot hold side by side)
// and their neighbours alike, is reached by exactly the paths of its shape:
// the route counted in sealbox_http_requests_total is the pattern the path
// matches, and a path of no route's shape (trailing slash, empty or extra segment) is unmatched: 404 when no
// method has a route for it, 405 with the methods that do.
func TestOverlappingRoutes(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "overlap@example.org")
	const id = "6f1c2b9e-3d4a-4e5f-8a7b-1c2d3e4f5a6b"
	const (
		session = "/v1/auth/devices/:session_id"
		channel = "/v1/auth/devices/enroll/channel/:channel_id"
	)
	for _, tc := range []struct {
		method, path string
		wantStatus   int
		wantCode     string // empty for a success
		wantRoute    string
		wantAllow    string // on a 405
	}{
		// The overlapping DELETE routes reach their handlers.
		{"DELETE", "/v1/auth/devices/" + id, 404, "error.session.not_found", session, ""},
		{"DELETE", "/v1/auth/devices/not-a-uuid", 400, "error.request.malformed", session, ""},
		{"DELETE", "/v1/auth/devices/directory", 400, "error.request.malformed", session, ""},
		{"DELETE", "/v1/auth/devices/enroll", 400, "error.request.malformed", session, ""},
		{"DELETE", "/v1/auth/devices/enroll/channel/sbx_rl_x", 404, "error.relay.channel_not_found", channel, ""},
		{"DELETE", "/v1/auth/devices/enroll/channel/x", 400, "error.request.malformed", channel, ""},
		// Their neighbours, registered with httprouter itself.
		{"GET", "/v1/auth/devices", 200, "", "/v1/auth/devices", ""},
		{"GET", "/v1/auth/devices/directory/" + id, 404, "error.directory.not_found", "/v1/auth/devices/directory/:user_id", ""},
		{"GET", "/v1/auth/devices/enroll/channel/x", 400, "error.request.malformed", channel, ""},
		{"POST", "/v1/auth/devices/enroll/channel/x", 400, "error.request.malformed", channel, ""},
		// Trailing slashes, empty and extra segments: no route's shape.
		{"DELETE", "/v1/auth/devices/", 404, "error.not_found", "unmatched", ""},
		{"DELETE", "/v1/auth/devices/" + id + "/", 404, "error.not_found", "unmatched", ""},
		{"DELETE", "/v1/auth/devices/enroll/channel/", 404, "error.not_found", "unmatched", ""},
		{"DELETE", "/v1/auth/devices/enroll/channel/x/", 404, "error.not_found", "unmatched", ""},
		{"DELETE", "/v1/auth/devices/enroll//x", 404, "error.not_found", "unmatched", ""},
		{"GET", "/v1/auth/devices/", 404, "error.not_found", "unmatched", ""},
		{"GET", "/v1/auth/devices/directory/", 404, "error.not_found", "unmatched", ""},
		{"POST", "/v1/auth/devices/enroll/", 404, "error.not_found", "unmatched", ""},
		// Other methods on a path some route has the shape of.
		{"DELETE", "/v1/auth/devices", 405, "error.method_not_allowed", "unmatched", "GET, OPTIONS"},
		{"PUT", "/v1/auth/devices/" + id, 405, "error.method_not_allowed", "unmatched", "DELETE, OPTIONS"},
		{"PATCH", "/v1/auth/devices/enroll/channel/x", 405, "error.method_not_allowed", "unmatched", "DELETE, GET, OPTIONS, POST"},
		{"GET", "/v1/auth/devices/enroll", 405, "error.method_not_allowed", "unmatched", "DELETE, OPTIONS, POST"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			metric := `sealbox_http_requests_total{listener="main",method="` + tc.method + `",route="` + tc.wantRoute +
				`",status="` + strconv.Itoa(tc.wantStatus) + `"}`
			before := metricValue(t, ts, metric)
			r := ts.Do(t, Req{Method: tc.method, Path: tc.path, Token: tok.Access})
			if tc.wantCode == "" {
				r.WantStatus(t, tc.wantStatus)
			} else {
				r.WantProblem(t, tc.wantStatus, tc.wantCode)
			}
			if got := r.Header.Get("Allow"); got != tc.wantAllow {
				t.Errorf("Allow: got %q, want %q", got, tc.wantAllow)
			}
			if got := metricValue(t, ts, metric); got != before+1 {
				t.Errorf("%s went from %d to %d, want one more: the request reached another route", metric, before, got)
			}
		})
	}
}

// metricValue is the value of the series named exactly by series (name and
// labels), 0 when it has none yet.
func metricValue(t *testing.T, ts *TestServer, series string) int {
	t.Helper()
	rec := httptest.NewRecorder()
	ts.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for line := range strings.Lines(rec.Body.String()) {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return n
		}
	}
	return 0
}
