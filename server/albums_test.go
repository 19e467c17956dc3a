package server_test

import (
	"net/http"
	"testing"
	"time"

	"sealbox/server"
	"sealbox/server/servertest"
)

func TestAlbumProvisionAndList(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.AlbumProtocol = "2026-01-01" })
	alice := ts.Register(t, "alice@example.org")
	bob := ts.Register(t, "bob@example.org")
	const first, second = "0f0e0d0c-0b0a-4908-8706-050403020100", "1f0e0d0c-0b0a-4908-8706-050403020100"
	provision := func(tok Tokens, id string) *Response {
		return ts.Do(t, Req{Method: "POST", Path: "/v1/albums", Token: tok.Access, Body: map[string]any{"album_id": id}})
	}

	r := provision(alice, first).WantStatus(t, http.StatusCreated)
	if got, want := string(r.Body), `{"album_id":"`+first+`","protocol_version":"2026-01-01","created":true}`; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	ts.Clock.Advance(time.Minute)
	r = provision(alice, first).WantStatus(t, http.StatusOK)
	if got, want := string(r.Body), `{"album_id":"`+first+`","protocol_version":"2026-01-01","created":false}`; got != want {
		t.Fatalf("repeat: got %s, want %s", got, want)
	}
	provision(bob, first).WantProblem(t, http.StatusForbidden, "error.album.forbidden")
	provision(alice, second).WantStatus(t, http.StatusCreated)

	r = ts.Do(t, Req{Method: "GET", Path: "/v1/albums", Token: alice.Access}).WantStatus(t, http.StatusOK)
	want := `{"albums":[` +
		`{"album_id":"` + first + `","protocol_version":"2026-01-01","created_at":"2026-11-22T10:00:00Z","sync_seq":0},` +
		`{"album_id":"` + second + `","protocol_version":"2026-01-01","created_at":"2026-11-22T10:01:00Z","sync_seq":0}]}`
	if string(r.Body) != want {
		t.Fatalf("list: got %s, want %s", r.Body, want)
	}
	if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("Cache-Control: got %q", cc)
	}
	r = ts.Do(t, Req{Method: "GET", Path: "/v1/albums", Token: bob.Access}).WantStatus(t, http.StatusOK)
	if got := string(r.Body); got != `{"albums":[]}` {
		t.Fatalf("bob's list: got %s", got)
	}
}

// TestAlbumProtocolDefaultsToProtocolMax: without AlbumProtocol, new albums
// are pinned to the configured ProtocolMax, whatever it is.
func TestAlbumProtocolDefaultsToProtocolMax(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.ProtocolMax = "2026-05-01" })
	tok := ts.Register(t, "a@example.org")
	r := ts.Do(t, Req{Method: "POST", Path: "/v1/albums", Token: tok.Access,
		Body: map[string]any{"album_id": "0f0e0d0c-0b0a-4908-8706-050403020100"}}).WantStatus(t, http.StatusCreated)
	if got := r.JSON(t)["protocol_version"]; got != ts.Config.ProtocolMax {
		t.Fatalf("protocol_version: got %v, want %s", got, ts.Config.ProtocolMax)
	}
}

func TestAlbumProvisionValidation(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	const id = "0f0e0d0c-0b0a-4908-8706-050403020100"
	malformed := func(name string, body any) servertest.Scenario {
		return servertest.Scenario{Name: name, Token: tok.Access, Body: body, WantStatus: 400, WantCode: "error.request.malformed"}
	}
	invalid := func(name string, body any) servertest.Scenario {
		return servertest.Scenario{Name: name, Token: tok.Access, Body: body, WantStatus: 422, WantCode: "error.request.invalid", WantField: "album_id"}
	}
	cases := []servertest.Scenario{
		{Name: "no token", Body: map[string]any{"album_id": id}, WantStatus: 401, WantCode: "error.auth.unauthenticated"},
		malformed("not JSON", "{"),
		malformed("unknown key", map[string]any{"album_id": id, "name": "x"}),
		malformed("wrong type", map[string]any{"album_id": 7}),
		{Name: "wrong media type", Token: tok.Access, Body: `{"album_id":"` + id + `"}`, ContentType: "text/plain",
			WantStatus: 415, WantCode: "error.request.unsupported_media_type"},
		invalid("missing", map[string]any{}),
		invalid("null", map[string]any{"album_id": nil}),
		invalid("uppercase", map[string]any{"album_id": "0F0E0D0C-0B0A-4908-8706-050403020100"}),
		invalid("no hyphens", map[string]any{"album_id": "0f0e0d0c0b0a49088706050403020100"}),
		invalid("braces", map[string]any{"album_id": "{" + id + "}"}),
		invalid("empty", map[string]any{"album_id": ""}),
	}
	for i := range cases {
		cases[i].Method, cases[i].Path = "POST", "/v1/albums"
	}
	servertest.RunScenarios(t, ts.Client, cases)
	if r := ts.Do(t, Req{Method: "GET", Path: "/v1/albums", Token: tok.Access}); string(r.Body) != `{"albums":[]}` {
		t.Fatalf("a refused provision wrote an album: %s", r.Body)
	}
}
