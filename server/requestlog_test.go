package server_test

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"sealbox/server"
)

// TestRequestLogDurationHasItsUnit: the request line's duration is named
// with its unit, duration_ms, a number of milliseconds.
func TestRequestLogDurationHasItsUnit(t *testing.T) {
	logs := &syncBuffer{}
	ts := MustOpenServer(t, func(c *server.Config) { c.Log = zerolog.New(logs) })
	ts.Do(t, Req{Method: "GET", Path: "/healthz"})
	// The line is written once the answer is on its way: wait for it.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, l := range logs.Lines() {
			if l["message"] != "request" || l["route"] != "/healthz" {
				continue
			}
			if _, bare := l["duration"]; bare {
				t.Fatalf("the request line has a duration without its unit: %v", l)
			}
			if ms, ok := l["duration_ms"].(float64); !ok || ms < 0 {
				t.Fatalf("the request line has no duration_ms number: %v", l)
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no request line for /healthz: %v", logs.Lines())
}
