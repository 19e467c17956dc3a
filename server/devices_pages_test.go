package server_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/fault"
)

// devicesPage fetches one page of GET /v1/auth/devices with query q.
func (ts *TestServer) devicesPage(tb testing.TB, access, q string) (ids []string, cohorts int, next string) {
	tb.Helper()
	m := ts.Do(tb, Req{Method: "GET", Path: "/v1/auth/devices?" + q, Token: access}).WantStatus(tb, http.StatusOK).JSON(tb)
	for _, x := range m["sessions"].([]any) {
		ids = append(ids, x.(map[string]any)["session_id"].(string))
	}
	next, hasNext := m["next_cursor"].(string)
	if _, present := m["next_cursor"]; present && (!hasNext || next == "") {
		tb.Fatalf("next_cursor present but not a cursor: %s", m["next_cursor"])
	}
	return ids, len(m["cohorts"].([]any)), next
}

// addSessions opens n sessions of the account straight in the store, two
// per instant, so ties by session_id are paged too.
func (ts *TestServer) addSessions(tb testing.TB, email string, n int) {
	tb.Helper()
	acct, err := ts.Store.AccountByEmail(email)
	if err != nil {
		tb.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if i%2 == 0 {
			ts.Clock.Advance(time.Second)
		}
		now := ts.Clock.Now()
		sess := &kv.Session{ID: fmt.Sprintf("0b5f2a9e-7c1d-4e8a-b3f6-%012x", 0xfff-i), AccountID: acct.ID, CreatedAt: now, AuthenticatedAt: now,
			AccessExpiresAt: now.Add(5 * time.Minute), RefreshExpiresAt: now.Add(5 * time.Minute), CohortHash: "c"}
		if err := ts.Store.LoginSucceeded(email, sess, fmt.Sprintf("sbx_at_page%d", i), fmt.Sprintf("sbx_rt_page%d", i)); err != nil {
			tb.Fatal(err)
		}
	}
}

// TestDevicesPages: pages of any size, followed by next_cursor, list every
// live session exactly once in the unpaged order (oldest first, ties by
// session_id); cohorts come on the first page; the last page has no
// next_cursor. Without limit a page holds 100; a client that ignores the
// cursor reads the first page as it always read the ledger.
func TestDevicesPages(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	ts.addSessions(t, "a@example.org", 230)
	all, _ := ts.Ledger(t, tok.Access) // the first page: 100
	if len(all) != 100 {
		t.Fatalf("default page: got %d sessions, want 100", len(all))
	}
	var want []string
	next := ""
	for page := 0; ; page++ {
		q := "limit=500"
		if next != "" {
			q += "&cursor=" + url.QueryEscape(next)
		}
		ids, _, n := ts.devicesPage(t, tok.Access, q)
		want = append(want, ids...)
		if next = n; next == "" {
			break
		}
	}
	if len(want) != 231 {
		t.Fatalf("limit=500: got %d sessions, want 231", len(want))
	}
	for i, s := range all {
		if s["session_id"] != want[i] {
			t.Fatalf("default page, session %d: got %v, want %s", i, s["session_id"], want[i])
		}
	}
	for _, limit := range []int{1, 7, 100, 231} {
		var got []string
		next, pages := "", 0
		for {
			q := fmt.Sprintf("limit=%d", limit)
			if next != "" {
				q += "&cursor=" + next
			}
			ids, cohorts, n := ts.devicesPage(t, tok.Access, q)
			if (pages == 0) != (cohorts == 1) {
				t.Fatalf("limit %d, page %d: %d cohorts; want the one cohort on the first page only", limit, pages, cohorts)
			}
			if len(ids) > limit || (n != "" && len(ids) != limit) {
				t.Fatalf("limit %d, page %d: %d sessions, next %q", limit, pages, len(ids), n)
			}
			got, pages, next = append(got, ids...), pages+1, n
			if next == "" {
				break
			}
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("limit %d: the pages (%d) list other sessions than the whole ledger", limit, pages)
		}
		if wantPages := (231 + limit - 1) / limit; pages != wantPages {
			t.Fatalf("limit %d: %d pages, want %d", limit, pages, wantPages)
		}
	}
	// Sessions that expire between pages are skipped, not the page cut short.
	_, _, next = ts.devicesPage(t, tok.Access, "limit=2")
	ts.Clock.Advance(5 * time.Minute)
	ids, _, n := ts.devicesPage(t, tok.Access, "limit=2&cursor="+next)
	if len(ids) != 0 || n != "" {
		t.Fatalf("after the added sessions expired: %v, next %q; want the last, empty page", ids, n)
	}
}

func TestDevicesPageRefusals(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	enc := base64.RawURLEncoding.EncodeToString
	good := enc(append(make([]byte, 8), "0b5f2a9e-7c1d-4e8a-b3f6-9d2c4e6a8b11"...))
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/devices?cursor=" + good, Token: tok.Access}).WantStatus(t, http.StatusOK)
	for _, tc := range []struct{ name, query, field string }{
		{"limit zero", "limit=0", "limit"},
		{"limit negative", "limit=-1", "limit"},
		{"limit over 500", "limit=501", "limit"},
		{"limit not a number", "limit=ten", "limit"},
		{"limit empty", "limit=", ""},
		{"cursor empty", "cursor=", "cursor"},
		{"cursor not base64url", "cursor=!!!!", "cursor"},
		{"cursor padded", "cursor=" + good + "==", "cursor"},
		{"cursor too short", "cursor=" + enc([]byte("short")), "cursor"},
		{"cursor without a session id", "cursor=" + enc(make([]byte, 44)), "cursor"},
		{"cursor with an uppercase id", "cursor=" + enc(append(make([]byte, 8), "0B5F2A9E-7C1D-4E8A-B3F6-9D2C4E6A8B11"...)), "cursor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ts.Do(t, Req{Method: "GET", Path: "/v1/auth/devices?" + tc.query, Token: tok.Access})
			if tc.field == "" {
				r.WantStatus(t, http.StatusOK) // an empty limit is the default
				return
			}
			p := r.WantProblem(t, http.StatusBadRequest, fault.ECodeMalformed)
			if p["field"] != tc.field {
				t.Fatalf("field: got %v, want %s", p["field"], tc.field)
			}
		})
	}
}
