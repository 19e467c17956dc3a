package server_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"sealbox/server/servertest"
)

func (f *opFixture) feed(tb testing.TB, query string) map[string]any {
	tb.Helper()
	return f.ts.Do(tb, Req{Method: "GET", Path: "/v1/albums/" + f.album + "/feed" + query, Token: f.tok.Access}).
		WantStatus(tb, http.StatusOK).JSON(tb)
}

func seqs(page map[string]any) []float64 {
	var out []float64
	for _, e := range page["entries"].([]any) {
		out = append(out, e.(map[string]any)["sync_seq"].(float64))
	}
	return out
}

func TestFeedEntries(t *testing.T) {
	f := newOpFixture(t)
	if got := string(f.ts.Do(t, Req{Method: "GET", Path: "/v1/albums/" + f.album + "/feed", Token: f.tok.Access}).Body); got != `{"entries":[],"next_after":0,"has_more":false}` {
		t.Fatalf("empty feed: %s", got)
	}
	create := f.createBody(assetA)
	f.op(t, create).WantStatus(t, http.StatusOK)
	f.ts.Clock.Advance(90 * time.Second)
	replace := f.replaceBody(assetA, manifestHash(create))
	f.op(t, replace).WantStatus(t, http.StatusOK)

	r := f.ts.Do(t, Req{Method: "GET", Path: "/v1/albums/" + f.album + "/feed", Token: f.tok.Access}).WantStatus(t, http.StatusOK)
	cenv := create["manifest_envelope"].(map[string]any)
	renv := replace["manifest_envelope"].(map[string]any)
	want := `{"entries":[` +
		`{"sync_seq":1,"asset_id":"` + assetA + `","action":"create","manifest_hash":"` + manifestHash(create) +
		`","ciphertext_hash":"` + f.ciphertext + `","metadata_blob_hash":"` + cenv["metadata_blob_hash"].(string) +
		`","applied_at":"2026-11-22T10:00:00Z"},` +
		`{"sync_seq":2,"asset_id":"` + assetA + `","action":"replace","manifest_hash":"` + manifestHash(replace) +
		`","ciphertext_hash":"` + f.ciphertext + `","metadata_blob_hash":"` + renv["metadata_blob_hash"].(string) +
		`","original_blob_hash":"` + f.original + `","applied_at":"2026-11-22T10:01:30Z"}` +
		`],"next_after":2,"has_more":false}`
	if string(r.Body) != want {
		t.Fatalf("feed:\ngot  %s\nwant %s", r.Body, want)
	}
	if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("Cache-Control: %q", cc)
	}
}

func TestFeedPaging(t *testing.T) {
	f := newOpFixture(t)
	for i := range 7 {
		f.op(t, f.createBody(fmt.Sprintf("a55e7000-0000-4000-8000-%012d", i))).WantStatus(t, http.StatusOK)
	}
	for _, tc := range []struct {
		query     string
		seqs      []float64
		nextAfter float64
		hasMore   bool
	}{
		{"", []float64{1, 2, 3, 4, 5, 6, 7}, 7, false},
		{"?limit=3", []float64{1, 2, 3}, 3, true},
		{"?after=3&limit=3", []float64{4, 5, 6}, 6, true},
		{"?after=6&limit=3", []float64{7}, 7, false},
		{"?after=4&limit=3", []float64{5, 6, 7}, 7, false},
		{"?after=7", nil, 7, false},
		{"?after=100", nil, 100, false},
		{"?after=18446744073709551615", nil, 18446744073709551615, false},
		{"?limit=5000", []float64{1, 2, 3, 4, 5, 6, 7}, 7, false},
	} {
		page := f.feed(t, tc.query)
		if got := seqs(page); fmt.Sprint(got) != fmt.Sprint(tc.seqs) {
			t.Errorf("%s: sync_seqs %v, want %v", tc.query, got, tc.seqs)
		}
		if page["next_after"] != tc.nextAfter || page["has_more"] != tc.hasMore {
			t.Errorf("%s: next_after %v has_more %v, want %v %v", tc.query, page["next_after"], page["has_more"], tc.nextAfter, tc.hasMore)
		}
	}
	// Walking the pages by next_after visits every entry once.
	var all []float64
	next := 0.0
	for {
		page := f.feed(t, fmt.Sprintf("?after=%d&limit=2", int(next)))
		all = append(all, seqs(page)...)
		next = page["next_after"].(float64)
		if !page["has_more"].(bool) {
			break
		}
	}
	if fmt.Sprint(all) != "[1 2 3 4 5 6 7]" {
		t.Fatalf("walk: %v", all)
	}
}

func TestFeedRefusals(t *testing.T) {
	f := newOpFixture(t)
	bob := newOpAccount(t, f.ts, "bob@example.org")
	cases := []servertest.Scenario{
		{Name: "after negative", Path: "/v1/albums/" + f.album + "/feed?after=-1", Token: f.tok.Access, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "after not a number", Path: "/v1/albums/" + f.album + "/feed?after=x", Token: f.tok.Access, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "after too large", Path: "/v1/albums/" + f.album + "/feed?after=18446744073709551616", Token: f.tok.Access, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "limit zero", Path: "/v1/albums/" + f.album + "/feed?limit=0", Token: f.tok.Access, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "limit over max", Path: "/v1/albums/" + f.album + "/feed?limit=5001", Token: f.tok.Access, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "limit not a number", Path: "/v1/albums/" + f.album + "/feed?limit=ten", Token: f.tok.Access, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "album id malformed", Path: "/v1/albums/xyz/feed", Token: f.tok.Access, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "another account's album", Path: "/v1/albums/" + bob.album + "/feed", Token: f.tok.Access, WantStatus: 403, WantCode: "error.album.forbidden"},
		{Name: "unknown album", Path: "/v1/albums/0f0e0d0c-0b0a-4908-8706-0504030201ff/feed", Token: f.tok.Access, WantStatus: 403, WantCode: "error.album.forbidden"},
		{Name: "no token", Path: "/v1/albums/" + f.album + "/feed", WantStatus: 401, WantCode: "error.auth.unauthenticated"},
	}
	for _, sc := range cases {
		sc.Method = "GET"
		t.Run(sc.Name, func(t *testing.T) { sc.Test(t, f.ts.Client) })
	}
}
