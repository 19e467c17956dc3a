package server_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"sealbox/kv/fault"
	"sealbox/server"
	"sealbox/server/servertest"
)

// registeredLink is a registered link and what it serves.
type registeredLink struct {
	id       string
	metadata []byte
	content  []byte
	secret   []byte
}

// patterned returns n bytes that differ at every offset a test reads.
func patterned(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

var linkSeq int

// newLink uploads a metadata blob and a content blob as the token's account
// and registers a link serving both; edit adjusts the registration body.
func (ts *TestServer) newLink(tb testing.TB, access string, edit ...func(map[string]any)) registeredLink {
	tb.Helper()
	linkSeq++
	l := registeredLink{
		id:       fmt.Sprintf("%032x", 0xabc000+linkSeq),
		metadata: []byte(fmt.Sprintf("sealed metadata %d", linkSeq)),
		content:  patterned(1000),
		secret:   []byte{0, 0xff, 'w', 'r', 'a', 'p', 0x80},
	}
	ts.Upload(tb, access, l.metadata)
	if held, _ := ts.Store.Holds(ts.UserID(tb, access), servertest.HashOf(l.content)); !held {
		ts.Upload(tb, access, l.content)
	}
	body := map[string]any{
		"opaque_id":      l.id,
		"metadata_hash":  servertest.HashOf(l.metadata),
		"serves":         []string{servertest.HashOf(l.metadata), servertest.HashOf(l.content), servertest.HashOf(l.content)},
		"wrapped_secret": base64.StdEncoding.EncodeToString(l.secret),
	}
	for _, e := range edit {
		e(body)
	}
	r := ts.Do(tb, Req{Method: "POST", Path: "/v1/shares", Token: access, Body: body}).WantStatus(tb, http.StatusCreated)
	if got, want := string(r.Body), `{"opaque_id":"`+l.id+`"}`; got != want {
		tb.Fatalf("register: got %s, want %s", got, want)
	}
	return l
}

func wantHeader(tb testing.TB, r *Response, name, want string) {
	tb.Helper()
	if got := r.Header.Get(name); got != want {
		tb.Fatalf("%s: got %q, want %q", name, got, want)
	}
}

func TestShareLinkRoundTrip(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "alice@example.org")
	storedAt := ts.Clock.Now().UTC().Format(http.TimeFormat)
	l := ts.newLink(t, tok.Access)

	r := ts.Do(t, Req{Method: "GET", Path: "/s/" + l.id}).WantStatus(t, http.StatusOK)
	if got, want := string(r.Body), `{"metadata_hash":"`+servertest.HashOf(l.metadata)+`","passphrase_protected":true}`; got != want {
		t.Fatalf("metadata: got %s, want %s", got, want)
	}
	wantHeader(t, r, "Referrer-Policy", "no-referrer")
	wantHeader(t, r, "Cache-Control", "no-store")
	wantHeader(t, r, "Content-Type", "application/json")

	r = ts.Do(t, Req{Method: "GET", Path: "/s/" + l.id + "/wrapped-secret"}).WantStatus(t, http.StatusOK)
	if !bytes.Equal(r.Body, l.secret) {
		t.Fatalf("wrapped secret: got %x, want %x", r.Body, l.secret)
	}
	wantHeader(t, r, "Content-Type", "application/octet-stream")
	wantHeader(t, r, "Cache-Control", "no-store")
	wantHeader(t, r, "Referrer-Policy", "no-referrer")

	for _, blob := range [][]byte{l.metadata, l.content} {
		r = ts.Do(t, Req{Method: "GET", Path: "/s/" + l.id + "/blob/" + servertest.HashOf(blob)}).WantStatus(t, http.StatusOK)
		if !bytes.Equal(r.Body, blob) {
			t.Fatalf("blob body differs")
		}
		wantHeader(t, r, "Content-Type", "application/octet-stream")
		wantHeader(t, r, "Content-Length", fmt.Sprint(len(blob)))
		wantHeader(t, r, "ETag", `"`+servertest.HashOf(blob)+`"`)
		wantHeader(t, r, "Last-Modified", storedAt)
		wantHeader(t, r, "Accept-Ranges", "bytes")
		wantHeader(t, r, "Cache-Control", "private, no-cache")
		wantHeader(t, r, "Referrer-Policy", "no-referrer")
		wantHeader(t, r, "X-Content-Type-Options", "nosniff")
	}
}

// TestShareBlobRangesAndConditionals runs every Range and conditional case of
// server/PROTOCOL.md §7 through /s/.../blob/... and checks the exact status, headers and
// bytes.
func TestShareBlobRangesAndConditionals(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "alice@example.org")
	lastModified := ts.Clock.Now().UTC().Format(http.TimeFormat)
	earlier := ts.Clock.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)
	l := ts.newLink(t, tok.Access)
	content := l.content
	etag := `"` + servertest.HashOf(content) + `"`
	path := "/s/" + l.id + "/blob/" + servertest.HashOf(content)

	type part struct {
		contentRange string
		body         []byte
	}
	cases := []struct {
		servertest.Scenario
		contentRange string // for a single 206
		body         []byte // for 200 and a single 206
		parts        []part // for a multipart 206
	}{
		{servertest.Scenario{Name: "whole", Header: nil, WantStatus: 200}, "", content, nil},
		{servertest.Scenario{Name: "first bytes", Header: map[string]string{"Range": "bytes=0-99"}, WantStatus: 206}, "bytes 0-99/1000", content[:100], nil},
		{servertest.Scenario{Name: "open ended", Header: map[string]string{"Range": "bytes=990-"}, WantStatus: 206}, "bytes 990-999/1000", content[990:], nil},
		{servertest.Scenario{Name: "suffix", Header: map[string]string{"Range": "bytes=-100"}, WantStatus: 206}, "bytes 900-999/1000", content[900:], nil},
		{servertest.Scenario{Name: "past the end is clamped", Header: map[string]string{"Range": "bytes=500-5000"}, WantStatus: 206}, "bytes 500-999/1000", content[500:], nil},
		{servertest.Scenario{Name: "multi", Header: map[string]string{"Range": "bytes=0-9,500-509"}, WantStatus: 206}, "", nil,
			[]part{{"bytes 0-9/1000", content[:10]}, {"bytes 500-509/1000", content[500:510]}}},
		{servertest.Scenario{Name: "malformed is ignored", Header: map[string]string{"Range": "bytes=abc"}, WantStatus: 200}, "", content, nil},
		{servertest.Scenario{Name: "unknown unit is ignored", Header: map[string]string{"Range": "items=0-9"}, WantStatus: 200}, "", content, nil},
		{servertest.Scenario{Name: "reversed is ignored", Header: map[string]string{"Range": "bytes=9-0"}, WantStatus: 200}, "", content, nil},
		{servertest.Scenario{Name: "unsatisfiable is 200, not 416", Header: map[string]string{"Range": "bytes=1000-2000"}, WantStatus: 200}, "", content, nil},
		{servertest.Scenario{Name: "If-None-Match matching", Header: map[string]string{"If-None-Match": etag}, WantStatus: 304}, "", nil, nil},
		{servertest.Scenario{Name: "If-None-Match weak matches too", Header: map[string]string{"If-None-Match": "W/" + etag}, WantStatus: 304}, "", nil, nil},
		{servertest.Scenario{Name: "If-None-Match in a list", Header: map[string]string{"If-None-Match": `"other", ` + etag}, WantStatus: 304}, "", nil, nil},
		{servertest.Scenario{Name: "If-None-Match star", Header: map[string]string{"If-None-Match": "*"}, WantStatus: 304}, "", nil, nil},
		{servertest.Scenario{Name: "If-None-Match other", Header: map[string]string{"If-None-Match": `"other"`}, WantStatus: 200}, "", content, nil},
		{servertest.Scenario{Name: "If-Modified-Since at storage", Header: map[string]string{"If-Modified-Since": lastModified}, WantStatus: 304}, "", nil, nil},
		{servertest.Scenario{Name: "If-Modified-Since earlier", Header: map[string]string{"If-Modified-Since": earlier}, WantStatus: 200}, "", content, nil},
		{servertest.Scenario{Name: "If-None-Match wins over If-Modified-Since", Header: map[string]string{"If-None-Match": `"other"`, "If-Modified-Since": lastModified}, WantStatus: 200}, "", content, nil},
		{servertest.Scenario{Name: "If-Range strong match", Header: map[string]string{"Range": "bytes=0-9", "If-Range": etag}, WantStatus: 206}, "bytes 0-9/1000", content[:10], nil},
		{servertest.Scenario{Name: "If-Range weak is whole", Header: map[string]string{"Range": "bytes=0-9", "If-Range": "W/" + etag}, WantStatus: 200}, "", content, nil},
		{servertest.Scenario{Name: "If-Range other is whole", Header: map[string]string{"Range": "bytes=0-9", "If-Range": `"other"`}, WantStatus: 200}, "", content, nil},
		{servertest.Scenario{Name: "If-Range date is whole", Header: map[string]string{"Range": "bytes=0-9", "If-Range": lastModified}, WantStatus: 200}, "", content, nil},
		{servertest.Scenario{Name: "If-Match is ignored", Header: map[string]string{"If-Match": `"other"`}, WantStatus: 200}, "", content, nil},
	}
	for _, tc := range cases {
		sc := tc.Scenario
		sc.Method, sc.Path = "GET", path
		sc.Teardown = func(tb testing.TB, _ servertest.Scenario, r *Response) {
			wantHeader(tb, r, "ETag", etag)
			wantHeader(tb, r, "Last-Modified", lastModified)
			wantHeader(tb, r, "Cache-Control", "private, no-cache")
			wantHeader(tb, r, "Referrer-Policy", "no-referrer")
			switch {
			case tc.WantStatus == 304:
				if len(r.Body) != 0 {
					tb.Fatalf("304 with a body: %q", r.Body)
				}
				return
			case tc.parts != nil:
				wantHeader(tb, r, "Accept-Ranges", "bytes")
				mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
				if err != nil || mt != "multipart/byteranges" {
					tb.Fatalf("Content-Type: %q", r.Header.Get("Content-Type"))
				}
				mr := multipart.NewReader(bytes.NewReader(r.Body), params["boundary"])
				for i, want := range tc.parts {
					p, err := mr.NextPart()
					if err != nil {
						tb.Fatalf("part %d: %v", i, err)
					}
					got, _ := io.ReadAll(p)
					if cr := p.Header.Get("Content-Range"); cr != want.contentRange || !bytes.Equal(got, want.body) {
						tb.Fatalf("part %d: %q %x, want %q %x", i, cr, got, want.contentRange, want.body)
					}
				}
				if _, err := mr.NextPart(); err != io.EOF {
					tb.Fatalf("more parts than asked for: %v", err)
				}
				return
			}
			wantHeader(tb, r, "Accept-Ranges", "bytes")
			wantHeader(tb, r, "Content-Type", "application/octet-stream")
			wantHeader(tb, r, "Content-Range", tc.contentRange)
			wantHeader(tb, r, "Content-Length", fmt.Sprint(len(tc.body)))
			if !bytes.Equal(r.Body, tc.body) {
				tb.Fatalf("body: got %d bytes, want %d", len(r.Body), len(tc.body))
			}
		}
		t.Run(sc.Name, func(t *testing.T) { sc.Test(t, ts.Client) })
	}
}

// TestShareNotFoundIsByteIdentical: an unknown, revoked or expired link, a
// blob the link does not name and the secret of a link without a passphrase
// all answer the very same 404 body.
func TestShareNotFoundIsByteIdentical(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.AccessTTL = 24 * time.Hour })
	tok := ts.Register(t, "alice@example.org")
	revoked := ts.newLink(t, tok.Access)
	ts.Do(t, Req{Method: "DELETE", Path: "/v1/shares/" + revoked.id, Token: tok.Access}).WantStatus(t, http.StatusNoContent)
	expiring := ts.newLink(t, tok.Access, func(b map[string]any) {
		b["expires_at"] = ts.Clock.Now().Add(time.Hour).Format(time.RFC3339)
	})
	plain := ts.newLink(t, tok.Access, func(b map[string]any) { delete(b, "wrapped_secret") })
	unnamed := servertest.HashOf([]byte("held by alice, not named by the link"))
	ts.Upload(t, tok.Access, []byte("held by alice, not named by the link"))
	ts.Clock.Advance(time.Hour)

	paths := map[string]string{
		"unknown link":              "/s/" + strings.Repeat("0", 32),
		"revoked link":              "/s/" + revoked.id,
		"expired link":              "/s/" + expiring.id + "/blob/" + servertest.HashOf(expiring.content),
		"blob not named":            "/s/" + plain.id + "/blob/" + unnamed,
		"secret without passphrase": "/s/" + plain.id + "/wrapped-secret",
	}
	var first []byte
	for name, path := range paths {
		r := ts.Do(t, Req{Method: "GET", Path: path})
		r.WantProblem(t, http.StatusNotFound, "error.share.not_found")
		wantHeader(t, r, "Referrer-Policy", "no-referrer")
		if first == nil {
			first = r.Body
		} else if !bytes.Equal(r.Body, first) {
			t.Fatalf("%s: body %s differs from %s", name, r.Body, first)
		}
	}
	// The other reads of those links fail the same way.
	for _, path := range []string{"/s/" + revoked.id + "/blob/" + servertest.HashOf(revoked.content), "/s/" + expiring.id, "/s/" + revoked.id + "/wrapped-secret"} {
		if r := ts.Do(t, Req{Method: "GET", Path: path}); r.Status != 404 || !bytes.Equal(r.Body, first) {
			t.Fatalf("%s: %d %s", path, r.Status, r.Body)
		}
	}
	// The live link still serves.
	ts.Do(t, Req{Method: "GET", Path: "/s/" + plain.id + "/blob/" + servertest.HashOf(plain.content)}).WantStatus(t, http.StatusOK)
}

func TestShareMalformedPathIs400(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "alice@example.org")
	l := ts.newLink(t, tok.Access)
	hash := servertest.HashOf(l.content)
	for _, path := range []string{
		"/s/" + strings.ToUpper(l.id),
		"/s/" + l.id[:31],
		"/s/" + l.id + "0",
		"/s/" + l.id[:31] + "g/wrapped-secret",
		"/s/" + l.id + "/blob/" + strings.ToUpper(hash),
		"/s/" + l.id + "/blob/" + hash[:63],
		"/s/" + strings.ToUpper(l.id) + "/blob/" + hash,
	} {
		r := ts.Do(t, Req{Method: "GET", Path: path})
		r.WantProblem(t, http.StatusBadRequest, "error.request.malformed")
		wantHeader(t, r, "Referrer-Policy", "no-referrer")
	}
	ts.Do(t, Req{Method: "DELETE", Path: "/v1/shares/" + strings.ToUpper(l.id), Token: tok.Access}).WantProblem(t, http.StatusBadRequest, "error.request.malformed")
}

// TestShareCannotExposeAnotherAccountsBlob: knowing a hash is not holding it.
func TestShareCannotExposeAnotherAccountsBlob(t *testing.T) {
	ts := MustOpenServer(t)
	alice := ts.Register(t, "alice@example.org")
	bob := ts.Register(t, "bob@example.org")
	secret := []byte("alice's ciphertext")
	ts.Upload(t, alice.Access, secret)
	mine := []byte("bob's metadata")
	ts.Upload(t, bob.Access, mine)
	body := map[string]any{
		"opaque_id": strings.Repeat("b", 32), "metadata_hash": servertest.HashOf(mine), "serves": []string{servertest.HashOf(mine), servertest.HashOf(secret)},
	}
	p := ts.Do(t, Req{Method: "POST", Path: "/v1/shares", Token: bob.Access, Body: body}).WantProblem(t, http.StatusUnprocessableEntity, "error.share.blob_not_owned")
	if p["field"] != "serves" {
		t.Fatalf("field: %v", p["field"])
	}
	// A hash nobody holds answers the same.
	body["serves"] = []string{servertest.HashOf(mine), servertest.HashOf([]byte("nobody's"))}
	ts.Do(t, Req{Method: "POST", Path: "/v1/shares", Token: bob.Access, Body: body}).WantProblem(t, http.StatusUnprocessableEntity, "error.share.blob_not_owned")
	ts.Do(t, Req{Method: "GET", Path: "/s/" + strings.Repeat("b", 32)}).WantProblem(t, http.StatusNotFound, "error.share.not_found")
	// Once Bob uploads the same bytes himself, he holds them and may share them.
	body["serves"] = []string{servertest.HashOf(mine), servertest.HashOf(secret)}
	ts.Upload(t, bob.Access, secret)
	ts.Do(t, Req{Method: "POST", Path: "/v1/shares", Token: bob.Access, Body: body}).WantStatus(t, http.StatusCreated)
}

func TestShareExpiry(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "alice@example.org")
	l := ts.newLink(t, tok.Access, func(b map[string]any) {
		b["expires_at"] = ts.Clock.Now().Add(time.Hour).Format(time.RFC3339)
	})
	ts.Clock.Advance(time.Hour - time.Second)
	ts.Do(t, Req{Method: "GET", Path: "/s/" + l.id}).WantStatus(t, http.StatusOK)
	ts.Do(t, Req{Method: "GET", Path: "/s/" + l.id + "/blob/" + servertest.HashOf(l.content)}).WantStatus(t, http.StatusOK)
	ts.Clock.Advance(time.Second)
	ts.Do(t, Req{Method: "GET", Path: "/s/" + l.id}).WantProblem(t, http.StatusNotFound, "error.share.not_found")
	ts.Do(t, Req{Method: "GET", Path: "/s/" + l.id + "/blob/" + servertest.HashOf(l.content)}).WantProblem(t, http.StatusNotFound, "error.share.not_found")
	ts.Do(t, Req{Method: "GET", Path: "/s/" + l.id + "/wrapped-secret"}).WantProblem(t, http.StatusNotFound, "error.share.not_found")
	if n, err := ts.Store.Sweep(); err != nil || n == 0 {
		t.Fatalf("sweep: %d, %v", n, err)
	}
	ts.Do(t, Req{Method: "GET", Path: "/s/" + l.id}).WantProblem(t, http.StatusNotFound, "error.share.not_found")
}

func TestShareRevoke(t *testing.T) {
	ts := MustOpenServer(t)
	alice := ts.Register(t, "alice@example.org")
	bob := ts.Register(t, "bob@example.org")
	l := ts.newLink(t, alice.Access)
	revoke := func(tok, id string) *Response {
		return ts.Do(t, Req{Method: "DELETE", Path: "/v1/shares/" + id, Token: tok})
	}
	// Another account's revoke answers 204 and changes nothing.
	revoke(bob.Access, l.id).WantStatus(t, http.StatusNoContent)
	ts.Do(t, Req{Method: "GET", Path: "/s/" + l.id}).WantStatus(t, http.StatusOK)
	revoke(alice.Access, strings.Repeat("e", 32)).WantStatus(t, http.StatusNoContent)
	revoke("", l.id).WantProblem(t, http.StatusUnauthorized, "error.auth.unauthenticated")

	revoke(alice.Access, l.id).WantStatus(t, http.StatusNoContent)
	for _, path := range []string{"/s/" + l.id, "/s/" + l.id + "/blob/" + servertest.HashOf(l.content), "/s/" + l.id + "/wrapped-secret"} {
		ts.Do(t, Req{Method: "GET", Path: path}).WantProblem(t, http.StatusNotFound, "error.share.not_found")
	}
	revoke(alice.Access, l.id).WantStatus(t, http.StatusNoContent)
}

func TestShareIdempotentRetryAndIDTaken(t *testing.T) {
	ts := MustOpenServer(t)
	alice := ts.Register(t, "alice@example.org")
	bob := ts.Register(t, "bob@example.org")
	meta, content := []byte("meta"), []byte("content")
	ts.Upload(t, alice.Access, meta)
	ts.Upload(t, alice.Access, content)
	ts.Upload(t, bob.Access, meta)
	ts.Upload(t, bob.Access, content)
	id := strings.Repeat("c", 32)
	body := func(edit func(map[string]any)) map[string]any {
		b := map[string]any{
			"opaque_id": id, "metadata_hash": servertest.HashOf(meta), "serves": []string{servertest.HashOf(meta), servertest.HashOf(content)},
			"wrapped_secret": "c2VjcmV0", "expires_at": "2026-12-01T00:00:00Z",
		}
		if edit != nil {
			edit(b)
		}
		return b
	}
	post := func(tok string, b map[string]any) *Response {
		return ts.Do(t, Req{Method: "POST", Path: "/v1/shares", Token: tok, Body: b})
	}
	post(alice.Access, body(nil)).WantStatus(t, http.StatusCreated)
	r := post(alice.Access, body(nil)).WantStatus(t, http.StatusCreated)
	if got := string(r.Body); got != `{"opaque_id":"`+id+`"}` {
		t.Fatalf("retry: %s", got)
	}
	// The same set of serves, in another order with a duplicate, is the same body.
	post(alice.Access, body(func(b map[string]any) {
		b["serves"] = []string{servertest.HashOf(content), servertest.HashOf(meta), servertest.HashOf(content)}
	})).WantStatus(t, http.StatusCreated)
	// The same instant spelled in another zone is the same expiry.
	post(alice.Access, body(func(b map[string]any) { b["expires_at"] = "2026-12-01T01:00:00+01:00" })).WantStatus(t, http.StatusCreated)

	for name, edit := range map[string]func(map[string]any){
		"other serves":   func(b map[string]any) { b["serves"] = []string{servertest.HashOf(meta)} },
		"other secret":   func(b map[string]any) { b["wrapped_secret"] = "b3RoZXI=" },
		"no secret":      func(b map[string]any) { delete(b, "wrapped_secret") },
		"other expiry":   func(b map[string]any) { b["expires_at"] = "2026-12-02T00:00:00Z" },
		"no expiry":      func(b map[string]any) { delete(b, "expires_at") },
		"other metadata": func(b map[string]any) { b["metadata_hash"] = servertest.HashOf(content) },
	} {
		t.Run(name, func(t *testing.T) {
			post(alice.Access, body(edit)).WantProblem(t, http.StatusUnprocessableEntity, "error.share.id_taken")
		})
	}
	// Another account, even with the very same body.
	post(bob.Access, body(nil)).WantProblem(t, http.StatusUnprocessableEntity, "error.share.id_taken")
	// A revoked link's registration is not replayed back to life.
	ts.Do(t, Req{Method: "DELETE", Path: "/v1/shares/" + id, Token: alice.Access}).WantStatus(t, http.StatusNoContent)
	post(alice.Access, body(nil)).WantProblem(t, http.StatusUnprocessableEntity, "error.share.id_taken")
	ts.Do(t, Req{Method: "GET", Path: "/s/" + id}).WantProblem(t, http.StatusNotFound, "error.share.not_found")
}

func TestShareCreateValidation(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "alice@example.org")
	meta, content := []byte("meta"), []byte("content")
	ts.Upload(t, tok.Access, meta)
	ts.Upload(t, tok.Access, content)
	m, c := servertest.HashOf(meta), servertest.HashOf(content)
	valid := func(edit func(map[string]any)) map[string]any {
		b := map[string]any{"opaque_id": strings.Repeat("d", 32), "metadata_hash": m, "serves": []string{m, c}}
		edit(b)
		return b
	}
	many := make([]string, 10_001)
	for i := range many {
		many[i] = fmt.Sprintf("%064x", i)
	}
	cases := []servertest.Scenario{
		{Name: "not JSON", Body: "{", WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "unknown key", Body: valid(func(b map[string]any) { b["title"] = "x" }), WantStatus: 400, WantCode: "error.request.malformed", WantField: "title"},
		{Name: "serves not an array", Body: valid(func(b map[string]any) { b["serves"] = m }), WantStatus: 400, WantCode: "error.request.malformed", WantField: "serves"},
		{Name: "opaque_id a number", Body: valid(func(b map[string]any) { b["opaque_id"] = 5 }), WantStatus: 400, WantCode: "error.request.malformed", WantField: "opaque_id"},
		{Name: "opaque_id missing", Body: valid(func(b map[string]any) { delete(b, "opaque_id") }), WantStatus: 422, WantCode: "error.request.invalid", WantField: "opaque_id"},
		{Name: "opaque_id uppercase", Body: valid(func(b map[string]any) { b["opaque_id"] = strings.Repeat("D", 32) }), WantStatus: 422, WantCode: "error.request.invalid", WantField: "opaque_id"},
		{Name: "opaque_id short", Body: valid(func(b map[string]any) { b["opaque_id"] = strings.Repeat("d", 31) }), WantStatus: 422, WantCode: "error.request.invalid", WantField: "opaque_id"},
		{Name: "opaque_id long", Body: valid(func(b map[string]any) { b["opaque_id"] = strings.Repeat("d", 33) }), WantStatus: 422, WantCode: "error.request.invalid", WantField: "opaque_id"},
		{Name: "metadata_hash null", Body: valid(func(b map[string]any) { b["metadata_hash"] = nil }), WantStatus: 422, WantCode: "error.request.invalid", WantField: "metadata_hash"},
		{Name: "metadata_hash malformed", Body: valid(func(b map[string]any) { b["metadata_hash"] = strings.ToUpper(m) }), WantStatus: 422, WantCode: "error.request.invalid", WantField: "metadata_hash"},
		{Name: "metadata_hash not served", Body: valid(func(b map[string]any) { b["serves"] = []string{c} }), WantStatus: 422, WantCode: "error.request.invalid", WantField: "metadata_hash"},
		{Name: "serves missing", Body: valid(func(b map[string]any) { delete(b, "serves") }), WantStatus: 422, WantCode: "error.request.invalid", WantField: "serves"},
		{Name: "serves empty", Body: valid(func(b map[string]any) { b["serves"] = []string{} }), WantStatus: 422, WantCode: "error.request.invalid", WantField: "serves"},
		{Name: "serves malformed", Body: valid(func(b map[string]any) { b["serves"] = []string{m, c[:63]} }), WantStatus: 422, WantCode: "error.request.invalid", WantField: "serves"},
		{Name: "serves null element", Body: valid(func(b map[string]any) { b["serves"] = []any{m, nil} }), WantStatus: 422, WantCode: "error.request.invalid", WantField: "serves"},
		{Name: "serves 10,001 distinct", Body: valid(func(b map[string]any) { b["serves"] = append([]string{m}, many[:10_000]...) }), WantStatus: 422, WantCode: "error.request.invalid", WantField: "serves"},
		{Name: "wrapped_secret not base64", Body: valid(func(b map[string]any) { b["wrapped_secret"] = "not base64!" }), WantStatus: 422, WantCode: "error.request.invalid", WantField: "wrapped_secret"},
		{Name: "wrapped_secret url alphabet", Body: valid(func(b map[string]any) { b["wrapped_secret"] = "-_-_" }), WantStatus: 422, WantCode: "error.request.invalid", WantField: "wrapped_secret"},
		{Name: "wrapped_secret unpadded", Body: valid(func(b map[string]any) { b["wrapped_secret"] = "YWI" }), WantStatus: 422, WantCode: "error.request.invalid", WantField: "wrapped_secret"},
		{Name: "wrapped_secret empty", Body: valid(func(b map[string]any) { b["wrapped_secret"] = "" }), WantStatus: 422, WantCode: "error.request.invalid", WantField: "wrapped_secret"},
		// Go's decoder skips line breaks; the text must be the bytes' one encoding.
		{Name: "wrapped_secret with a line break", Body: valid(func(b map[string]any) { b["wrapped_secret"] = "c2Vj\ncmV0" }), WantStatus: 422, WantCode: "error.request.invalid", WantField: "wrapped_secret"},
		{Name: "wrapped_secret over 16 KiB", Body: valid(func(b map[string]any) {
			b["wrapped_secret"] = base64.StdEncoding.EncodeToString(make([]byte, 16<<10+1))
		}), WantStatus: 422, WantCode: "error.request.invalid", WantField: "wrapped_secret"},
		{Name: "expires_at not RFC 3339", Body: valid(func(b map[string]any) { b["expires_at"] = "2027-01-01" }), WantStatus: 422, WantCode: "error.request.invalid", WantField: "expires_at"},
		{Name: "expires_at now", Body: valid(func(b map[string]any) { b["expires_at"] = "2026-11-22T10:00:00Z" }), WantStatus: 422, WantCode: "error.request.invalid", WantField: "expires_at"},
		{Name: "expires_at past", Body: valid(func(b map[string]any) { b["expires_at"] = "2020-01-01T00:00:00Z" }), WantStatus: 422, WantCode: "error.request.invalid", WantField: "expires_at"},
	}
	for _, sc := range cases {
		sc.Method, sc.Path, sc.Token = "POST", "/v1/shares", tok.Access
		t.Run(sc.Name, func(t *testing.T) { sc.Test(t, ts.Client) })
	}
	ts.Do(t, Req{Method: "POST", Path: "/v1/shares", Body: valid(func(map[string]any) {})}).WantProblem(t, 401, "error.auth.unauthenticated")
	ts.Do(t, Req{Method: "POST", Path: "/v1/shares", Token: tok.Access, Body: `{}`, ContentType: "text/plain"}).WantProblem(t, 415, "error.request.unsupported_media_type")
	ts.Do(t, Req{Method: "GET", Path: "/s/" + strings.Repeat("d", 32)}).WantProblem(t, http.StatusNotFound, "error.share.not_found")

	// The limits themselves are accepted: 10,001 entries that are 2 distinct
	// hashes, a secret of exactly 16 KiB, an expiry a second away.
	dupes := make([]string, 10_001)
	for i := range dupes {
		dupes[i] = []string{m, c}[i%2]
	}
	secret := bytes.Repeat([]byte{0xfe}, 16<<10)
	ts.Do(t, Req{Method: "POST", Path: "/v1/shares", Token: tok.Access, Body: valid(func(b map[string]any) {
		b["serves"] = dupes
		b["wrapped_secret"] = base64.StdEncoding.EncodeToString(secret)
		b["expires_at"] = "2026-11-22T10:00:01Z"
	})}).WantStatus(t, http.StatusCreated)
	r := ts.Do(t, Req{Method: "GET", Path: "/s/" + strings.Repeat("d", 32) + "/wrapped-secret"}).WantStatus(t, http.StatusOK)
	if !bytes.Equal(r.Body, secret) {
		t.Fatal("the 16 KiB secret did not come back exactly")
	}
}

func TestShareReadRateLimit(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) {
		c.ShareRate, c.ShareBurst = 0.5, 3
		c.TrustProxy = true
	})
	tok := ts.Register(t, "alice@example.org")
	l := ts.newLink(t, tok.Access)
	from := func(addr string) map[string]string { return map[string]string{"X-Forwarded-For": addr} }
	// Every kind of read spends the address's tokens, a 404 or 400 too.
	ts.Do(t, Req{Method: "GET", Path: "/s/" + l.id, Header: from("192.0.2.1")}).WantStatus(t, http.StatusOK)
	ts.Do(t, Req{Method: "GET", Path: "/s/" + strings.Repeat("0", 32), Header: from("192.0.2.1")}).WantStatus(t, http.StatusNotFound)
	ts.Do(t, Req{Method: "GET", Path: "/s/nope/wrapped-secret", Header: from("192.0.2.1")}).WantStatus(t, http.StatusBadRequest)
	for _, path := range []string{"/s/" + l.id, "/s/" + l.id + "/blob/" + servertest.HashOf(l.content), "/s/" + l.id + "/wrapped-secret"} {
		r := ts.Do(t, Req{Method: "GET", Path: path, Header: from("192.0.2.1")})
		r.WantProblem(t, http.StatusTooManyRequests, "error.rate_limited")
		wantHeader(t, r, "Retry-After", "2")
		wantHeader(t, r, "Referrer-Policy", "no-referrer")
	}
	// Another address has its own bucket.
	ts.Do(t, Req{Method: "GET", Path: "/s/" + l.id, Header: from("192.0.2.2")}).WantStatus(t, http.StatusOK)
	// A token comes back after 1/rate seconds.
	ts.Clock.Advance(2 * time.Second)
	ts.Do(t, Req{Method: "GET", Path: "/s/" + l.id, Header: from("192.0.2.1")}).WantStatus(t, http.StatusOK)
	ts.Do(t, Req{Method: "GET", Path: "/s/" + l.id, Header: from("192.0.2.1")}).WantProblem(t, http.StatusTooManyRequests, "error.rate_limited")
	// Every refusal is counted under the limit's flag name.
	ts.WantMetric(t, `sealbox_limit_refusals_total{limit="share-rate"} 4`)
	// Registration and revocation are not share reads.
	ts.Do(t, Req{Method: "DELETE", Path: "/v1/shares/" + l.id, Token: tok.Access, Header: from("192.0.2.1")}).WantStatus(t, http.StatusNoContent)
}

// Every /s/ answer carries Referrer-Policy, also where no route matches.
func TestShareReferrerPolicyOnEveryAnswer(t *testing.T) {
	ts := MustOpenServer(t)
	for _, p := range []string{"/s/ffffffffffffffffffffffffffffffff", "/s/not-an-id", "/s/a/b/c/d", "/s/"} {
		r := ts.Do(t, Req{Method: "GET", Path: p})
		if got := r.Header.Get("Referrer-Policy"); got != "no-referrer" {
			t.Errorf("GET %s (%d): Referrer-Policy %q", p, r.Status, got)
		}
	}
}

// TestShareBlobHead: a HEAD of a blob a link serves answers the headers its GET
// would (the size in Content-Length, a range's Content-Range, the ETag)
// with no body, and a HEAD of a blob the link does not name is the same 404.
func TestShareBlobHead(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "head@example.org")
	l := ts.newLink(t, tok.Access)
	blob := "/s/" + l.id + "/blob/" + servertest.HashOf(l.content)
	r := ts.Do(t, Req{Method: "HEAD", Path: blob}).WantStatus(t, http.StatusOK)
	wantHeader(t, r, "Content-Length", strconv.Itoa(len(l.content)))
	wantHeader(t, r, "ETag", `"`+servertest.HashOf(l.content)+`"`)
	if len(r.Body) != 0 {
		t.Errorf("HEAD answered %d body bytes", len(r.Body))
	}
	r = ts.Do(t, Req{Method: "HEAD", Path: blob, Header: map[string]string{"Range": "bytes=0-9"}}).WantStatus(t, http.StatusPartialContent)
	wantHeader(t, r, "Content-Range", "bytes 0-9/"+strconv.Itoa(len(l.content)))
	ts.Do(t, Req{Method: "HEAD", Path: "/s/" + l.id + "/blob/" + strings.Repeat("e", 64)}).WantStatus(t, http.StatusNotFound)
}

// TestShareDisabledOwner: disabling an account makes every read of its links
// (metadata, blob, wrapped secret) answer the very body a revoked link does,
// at once and on every node, although each node had the blob read cached;
// its relay channels refuse posts and drains. Enabling it brings back the
// links still live, not one that expired meanwhile.
func TestShareDisabledOwner(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.AccessTTL = 24 * time.Hour })
	other := ts.SecondNode(t)
	alice := ts.Register(t, "alice@example.org")
	bob := ts.Register(t, "bob@example.org")
	revoked := ts.newLink(t, bob.Access)
	ts.Do(t, Req{Method: "DELETE", Path: "/v1/shares/" + revoked.id, Token: bob.Access}).WantStatus(t, http.StatusNoContent)
	gone := ts.Do(t, Req{Method: "GET", Path: "/s/" + revoked.id}).WantStatus(t, http.StatusNotFound).Body

	plain := ts.newLink(t, alice.Access)
	expiring := ts.newLink(t, alice.Access, func(b map[string]any) {
		b["expires_at"] = ts.Clock.Now().Add(time.Hour).Format(time.RFC3339)
	})
	ch := ts.openChannel(t, alice.Access)
	ts.post(t, ch, "to_enrollee", "hello").WantStatus(t, http.StatusNoContent)
	code, _ := ts.issueCode(t, alice.Access)
	reads := func(l registeredLink) []string {
		return []string{"/s/" + l.id, "/s/" + l.id + "/blob/" + servertest.HashOf(l.content), "/s/" + l.id + "/wrapped-secret"}
	}
	nodes := []*TestServer{ts, other}
	for _, node := range nodes {
		for _, l := range []registeredLink{plain, expiring} {
			for _, path := range reads(l) {
				node.Do(t, Req{Method: "GET", Path: path}).WantStatus(t, http.StatusOK)
			}
		}
	}

	if _, err := ts.Store.SetDisabled("alice@example.org", true); err != nil {
		t.Fatal(err)
	}
	for _, node := range nodes {
		for _, l := range []registeredLink{plain, expiring} {
			for _, path := range reads(l) {
				if r := node.Do(t, Req{Method: "GET", Path: path}); r.Status != http.StatusNotFound || !bytes.Equal(r.Body, gone) {
					t.Fatalf("%s of a disabled account's link: %d %s, want 404 %s", path, r.Status, r.Body, gone)
				}
			}
		}
		node.post(t, ch, "to_enrollee", "more").WantProblem(t, http.StatusNotFound, "error.relay.channel_not_found")
		node.Do(t, Req{Method: "GET", Path: channelPath(ch) + "?direction=to_enrollee"}).WantProblem(t, http.StatusNotFound, "error.relay.channel_not_found")
		node.redeem(t, code, "").WantProblem(t, http.StatusNotFound, "error.enrollment.code_refused")
	}

	ts.Clock.Advance(time.Hour)
	if _, err := ts.Store.SetDisabled("alice@example.org", false); err != nil {
		t.Fatal(err)
	}
	for _, node := range nodes {
		for _, path := range reads(plain) {
			node.Do(t, Req{Method: "GET", Path: path}).WantStatus(t, http.StatusOK)
		}
		for _, path := range reads(expiring) {
			node.Do(t, Req{Method: "GET", Path: path}).WantProblem(t, http.StatusNotFound, "error.share.not_found")
		}
	}
}

// TestShareCapsPerAccount: an account's links are bounded (--max-share-links,
// --max-share-serves): one past either cap is 429 error.limit.shares with
// Retry-After, registers nothing and is counted under its flag; a retry of a
// registered link and another account's links pass.
func TestShareCapsPerAccount(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.MaxShareLinks, c.MaxShareServes = 2, 3 })
	alice := ts.Register(t, "alice@example.org")
	bob := ts.Register(t, "bob@example.org")
	first := ts.newLink(t, alice.Access)
	post := func(tok string, id string, served ...[]byte) *Response {
		body := map[string]any{"opaque_id": id, "metadata_hash": servertest.HashOf(served[0]), "serves": []string{}}
		for _, b := range served {
			body["serves"] = append(body["serves"].([]string), servertest.HashOf(b))
		}
		return ts.Do(t, Req{Method: "POST", Path: "/v1/shares", Token: tok, Body: body})
	}
	two := []byte("a second link's metadata")
	ts.Upload(t, alice.Access, two)
	over := strings.Repeat("d", 32)
	r := post(alice.Access, over, two, first.content)
	p := r.WantProblem(t, http.StatusTooManyRequests, fault.ECodeLimitShares)
	if detail := p["detail"].(string); !strings.Contains(detail, "serve 2 blobs and this one 2 more, past the 3 allowed") {
		t.Fatalf("detail: %q", detail)
	}
	// No link expires, so waiting frees nothing: the wait is the fixed hour.
	wantHeader(t, r, "Retry-After", "3600")
	ts.Do(t, Req{Method: "GET", Path: "/s/" + over}).WantProblem(t, http.StatusNotFound, fault.ECodeShareNotFound)
	post(alice.Access, strings.Repeat("e", 32), two).WantStatus(t, http.StatusCreated)
	p = post(alice.Access, over, two).WantProblem(t, http.StatusTooManyRequests, fault.ECodeLimitShares)
	if detail := p["detail"].(string); !strings.Contains(detail, "has 2 share links") {
		t.Fatalf("detail: %q", detail)
	}
	post(alice.Access, strings.Repeat("e", 32), two).WantStatus(t, http.StatusCreated)
	ts.newLink(t, bob.Access)
	ts.WantMetric(t, `sealbox_limit_refusals_total{limit="max-share-serves"} 1`)
	ts.WantMetric(t, `sealbox_limit_refusals_total{limit="max-share-links"} 1`)
}
