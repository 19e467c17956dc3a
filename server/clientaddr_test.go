package server_test

import (
	"net/http"
	"testing"

	"sealbox/server"
)

// TestRateLimitKeys: the per-address limits key an IPv6 client on its
// IPv6Prefix (a /64 by default) and an address from the trusted proxy in
// one spelling: IPv4-mapped IPv6 is IPv4, and ports and zones are dropped.
func TestRateLimitKeys(t *testing.T) {
	for _, tc := range []struct {
		name        string
		prefix      int
		first, same string // same spends first's bucket
		other       string // has a bucket of its own
	}{
		{"one /64", 64, "2001:db8::1", "2001:db8::ffff:2", "2001:db8:0:1::1"},
		{"one /56", 56, "2001:db8::1", "2001:db8:0:ff::1", "2001:db8:0:100::1"},
		{"full addresses", 128, "2001:db8::1", "2001:db8::1", "2001:db8::2"},
		{"IPv4-mapped", 64, "192.0.2.1", "::ffff:192.0.2.1", "192.0.2.2"},
		{"IPv4 with a port", 64, "192.0.2.1", "192.0.2.1:5678", "192.0.2.2:5678"},
		{"IPv6 with a port", 64, "2001:db8::1", "[2001:db8::2]:443", "[2001:db8:0:1::1]:443"},
		{"IPv6 zone", 64, "fe80::1%eth0", "fe80::2", "fe80:0:0:1::1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := MustOpenServer(t, func(c *server.Config) {
				c.ShareRate, c.ShareBurst = 0.001, 1
				c.TrustProxy = true
				c.IPv6Prefix = tc.prefix
			})
			tok := ts.Register(t, "a@example.org")
			l := ts.newLink(t, tok.Access)
			read := func(addr string) *Response {
				return ts.Do(t, Req{Method: "GET", Path: "/s/" + l.id, Header: map[string]string{"X-Forwarded-For": "203.0.113.9, " + addr}})
			}
			read(tc.first).WantStatus(t, http.StatusOK)
			read(tc.same).WantProblem(t, http.StatusTooManyRequests, "error.rate_limited")
			read(tc.other).WantStatus(t, http.StatusOK)
		})
	}
}
