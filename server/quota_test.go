package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"

	"sealbox/server"
	"sealbox/server/servertest"
)

func TestUploadPastQuotaStoresNothing(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "q@example.org")
	album := ts.NewAlbum(t, tok.Access)
	up := ts.OpenUpload(t, tok.Access, album)
	ts.PutBlob(t, tok.Access, up, bytes.Repeat([]byte{1}, 600)).WantStatus(t, 201)
	if err := ts.Store.SetQuota("q@example.org", 1000); err != nil {
		t.Fatal(err)
	}
	before := blobFiles(t, ts)
	ts.PutBlob(t, tok.Access, up, bytes.Repeat([]byte{2}, 401)).WantProblem(t, 403, "error.quota.exceeded")
	if after := blobFiles(t, ts); len(after) != len(before) {
		t.Fatalf("a refused upload left a file: %v", after)
	}
	// An already-held blob costs nothing; up to the quota still fits.
	ts.PutBlob(t, tok.Access, up, bytes.Repeat([]byte{1}, 600)).WantStatus(t, 200)
	ts.PutBlob(t, tok.Access, up, bytes.Repeat([]byte{3}, 400)).WantStatus(t, 201)
}

// TestChunkedUploadPastQuotaStoresNothing: a body without Content-Length
// announces nothing to check in advance, so the quota must bound the stream
// itself (issue 7.6: refused uploads store nothing).
func TestChunkedUploadPastQuotaStoresNothing(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "q@example.org")
	up := ts.OpenUpload(t, tok.Access, ts.NewAlbum(t, tok.Access))
	held := bytes.Repeat([]byte{1}, 600)
	ts.PutBlob(t, tok.Access, up, held).WantStatus(t, 201)
	if err := ts.Store.SetQuota("q@example.org", 1000); err != nil {
		t.Fatal(err)
	}
	before := blobFiles(t, ts)
	wantRefused := func(data []byte) {
		t.Helper()
		ts.PutBlobChunked(t, tok.Access, up, data, "application/octet-stream").WantProblem(t, 403, "error.quota.exceeded")
		if after := blobFiles(t, ts); len(after) != len(before) {
			t.Fatalf("a refused upload left a file: %v", after)
		}
	}
	wantRefused(bytes.Repeat([]byte{2}, 401))
	// An already-held blob costs nothing, however large.
	ts.PutBlobChunked(t, tok.Access, up, held, "application/octet-stream").WantStatus(t, 200)
	// Exactly the room left fits; then no byte more does.
	ts.PutBlobChunked(t, tok.Access, up, bytes.Repeat([]byte{3}, 400), "application/octet-stream").WantStatus(t, 201)
	before = blobFiles(t, ts)
	wantRefused([]byte{4})
	if n, _ := ts.Store.HeldBytes(ts.UserID(t, tok.Access)); n != 1000 {
		t.Fatalf("held bytes: got %d, want 1000", n)
	}
}

// TestDefaultQuota: --default-quota is the quota of every account
// registration creates, refused as any quota is and counted in the
// metrics; an account created before it keeps its own.
func TestDefaultQuota(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.DefaultQuota = 1000 })
	tok := ts.Register(t, "q@example.org")
	if a, err := ts.Store.AccountByEmail("q@example.org"); err != nil || a.QuotaBytes != 1000 {
		t.Fatalf("new account's quota: got %v %v, want 1000", a, err)
	}
	up := ts.OpenUpload(t, tok.Access, ts.NewAlbum(t, tok.Access))
	ts.PutBlob(t, tok.Access, up, bytes.Repeat([]byte{1}, 600)).WantStatus(t, 201)
	p := ts.PutBlob(t, tok.Access, up, bytes.Repeat([]byte{2}, 401)).WantProblem(t, 403, "error.quota.exceeded")
	if !strings.Contains(p["detail"].(string), "quota") {
		t.Fatalf("detail: %v", p["detail"])
	}
	ts.PutBlob(t, tok.Access, up, bytes.Repeat([]byte{3}, 400)).WantStatus(t, 201)
	ts.WantMetric(t, `sealbox_limit_refusals_total{limit="quota"} 1`)
}

// TestAccountBytesMetric: sealbox_account_bytes shows the 10 accounts that
// hold the most, and no other.
func TestAccountBytesMetric(t *testing.T) {
	ts := MustOpenServer(t)
	ids := make([]string, 11)
	for i := range ids {
		tok := ts.Register(t, fmt.Sprintf("u%d@example.org", i))
		ids[i] = ts.UserID(t, tok.Access)
		ts.Upload(t, tok.Access, bytes.Repeat([]byte{byte(i)}, 100+i))
	}
	for i, id := range ids {
		want := 100 + i
		if i == 0 {
			want = 0 // the smallest, not shown
		}
		series := fmt.Sprintf(`sealbox_account_bytes{user_id=%q}`, id)
		if got := metricValue(t, ts, series); got != want {
			t.Errorf("%s: got %d, want %d", series, got, want)
		}
	}
}

// TestConcurrentPutsStopAtQuota: 2N PUTs of distinct blobs race for a
// quota that admits exactly N of them. Exactly N are stored (201) and the
// others refused (403 error.quota.exceeded), and the account's usage is the
// N blobs' bytes, whether the blobs stay inline or go to the blob engine,
// however the store commits concurrent uploads (issue 41: together).
func TestConcurrentPutsStopAtQuota(t *testing.T) {
	const n = 16
	for _, size := range []int{1 << 10, 20 << 10} { // inline, and a file
		t.Run(fmt.Sprintf("%dKiB", size>>10), func(t *testing.T) {
			ts := MustOpenServer(t)
			tok := ts.Register(t, "q@example.org")
			up := ts.OpenUpload(t, tok.Access, ts.NewAlbum(t, tok.Access))
			if err := ts.Store.SetQuota("q@example.org", int64(n*size)); err != nil {
				t.Fatal(err)
			}
			answers := make([]string, 2*n)
			var wg sync.WaitGroup
			for i := range answers {
				wg.Go(func() {
					data := bytes.Repeat([]byte{byte(i + 1)}, size)
					r, err := ts.Send(Req{Method: "PUT", Path: "/v1/uploads/" + up + "/blobs/" + servertest.HashOf(data),
						Token: tok.Access, Body: data, ContentType: "application/octet-stream"})
					if err != nil {
						t.Error(err)
						return
					}
					var problem struct{ Code string }
					json.Unmarshal(r.Body, &problem)
					answers[i] = fmt.Sprint(r.Status, " ", problem.Code)
				})
			}
			wg.Wait()
			counts := map[string]int{}
			for _, a := range answers {
				counts[a]++
			}
			if want := map[string]int{"201 ": n, "403 error.quota.exceeded": n}; !maps.Equal(counts, want) {
				t.Errorf("answers %v, want %v", counts, want)
			}
			if held, err := ts.Store.HeldBytes(ts.UserID(t, tok.Access)); err != nil || held != int64(n*size) {
				t.Errorf("usage %d, %v; want %d", held, err, n*size)
			}
		})
	}
}
