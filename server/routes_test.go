package server_test

import (
	"net/http"
	"testing"
)

// TestRoutingBelowOverlapPrefix: the overlapping DELETE routes below
// /v1/auth/devices are dispatched by one catch-all in the router, yet every path answers as if each route
// were registered alone (server/PROTOCOL.md §1): a path no route of any method has the
// shape of is 404 error.not_found for every method, OPTIONS included, and a
// path with routes is 405 with exactly their methods in Allow.
func TestRoutingBelowOverlapPrefix(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "routes@example.org")
	const id = "6f1c2b9e-3d4a-4e5f-8a7b-1c2d3e4f5a6b"
	methods := []string{"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

	for _, path := range []string{
		"/v1/auth/devices/",
		"/v1/auth/devices//",
		"/v1/auth/devices/a/b",
		"/v1/auth/devices/" + id + "/x",
		"/v1/auth/devices/enroll/channel",
		"/v1/auth/devices/enroll/channel/x/y",
		"/v1/auth/devices/directory/a/b",
	} {
		for _, m := range methods {
			t.Run(m+" "+path, func(t *testing.T) {
				r := ts.Do(t, Req{Method: m, Path: path, Token: tok.Access})
				r.WantProblem(t, http.StatusNotFound, "error.not_found")
				if allow := r.Header.Get("Allow"); allow != "" {
					t.Fatalf("404 with Allow %q", allow)
				}
			})
		}
	}

	for _, tc := range []struct {
		method, path, allow string
	}{
		{"GET", "/v1/auth/devices/" + id, "DELETE, OPTIONS"},
		{"POST", "/v1/auth/devices/" + id, "DELETE, OPTIONS"},
		{"OPTIONS", "/v1/auth/devices/" + id, "DELETE, OPTIONS"},
		{"GET", "/v1/auth/devices/directory", "DELETE, OPTIONS, POST"},
		{"PUT", "/v1/auth/devices/enroll", "DELETE, OPTIONS, POST"},
		{"DELETE", "/v1/auth/devices/directory/" + id, "GET, OPTIONS"},
		{"DELETE", "/v1/auth/devices/enroll/redeem", "OPTIONS, POST"},
		{"PUT", "/v1/auth/devices/enroll/channel/x", "DELETE, GET, OPTIONS, POST"},
		{"OPTIONS", "/v1/auth/devices/enroll/channel/x", "DELETE, GET, OPTIONS, POST"},
		{"DELETE", "/v1/auth/devices", "GET, OPTIONS"},
		{"GET", "/v1/auth/login", "OPTIONS, POST"},
		{"OPTIONS", "/v1/auth/login", "OPTIONS, POST"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := ts.Do(t, Req{Method: tc.method, Path: tc.path, Token: tok.Access})
			if tc.method == "OPTIONS" {
				r.WantStatus(t, http.StatusOK)
				if len(r.Body) != 0 {
					t.Fatalf("OPTIONS with a body: %q", r.Body)
				}
			} else {
				r.WantProblem(t, http.StatusMethodNotAllowed, "error.method_not_allowed")
			}
			if got := r.Header.Get("Allow"); got != tc.allow {
				t.Fatalf("Allow: got %q, want %q", got, tc.allow)
			}
		})
	}

	// The overlapping routes themselves still reach their handlers, with
	// the static segment winning over the parameter.
	ts.Do(t, Req{Method: "DELETE", Path: "/v1/auth/devices/" + id, Token: tok.Access}).WantProblem(t, http.StatusNotFound, "error.session.not_found")
	ts.Do(t, Req{Method: "DELETE", Path: "/v1/auth/devices/directory", Token: tok.Access}).WantProblem(t, http.StatusBadRequest, "error.request.malformed")
	ts.Do(t, Req{Method: "DELETE", Path: "/v1/auth/devices/enroll/channel/sbx_rl_x", Token: tok.Access}).WantProblem(t, http.StatusNotFound, "error.relay.channel_not_found")
	ts.Do(t, Req{Method: "DELETE", Path: "/v1/auth/devices/enroll/channel/x", Token: tok.Access}).WantProblem(t, http.StatusBadRequest, "error.request.malformed")
	ts.Do(t, Req{Method: "OPTIONS", Path: "/v1/nope"}).WantProblem(t, http.StatusNotFound, "error.not_found")
}
