package server_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"sealbox/server"
	"sealbox/server/servertest"
)

// TestUploadSessionCap: past MaxUploadSessions open sessions an account is
// refused (429, error.limit.upload_sessions) with the wait until its first
// session expires, counted in the limit metric; closing one frees a place.
func TestUploadSessionCap(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.MaxUploadSessions = 2 })
	tok := ts.Register(t, "a@example.org")
	album := ts.NewAlbum(t, tok.Access)
	first := ts.OpenUpload(t, tok.Access, album)
	ts.Clock.Advance(10 * time.Minute)
	ts.OpenUpload(t, tok.Access, album)
	r := ts.Do(t, Req{Method: "POST", Path: "/v1/albums/" + album + "/uploads", Token: tok.Access})
	r.WantProblem(t, http.StatusTooManyRequests, "error.limit.upload_sessions")
	wantHeader(t, r, "Retry-After", strconv.Itoa(50*60))
	ts.WantMetric(t, `sealbox_limit_refusals_total{limit="max-upload-sessions"} 1`)
	ts.Do(t, Req{Method: "DELETE", Path: "/v1/uploads/" + first, Token: tok.Access}).WantStatus(t, http.StatusNoContent)
	ts.OpenUpload(t, tok.Access, album)
}

// TestTransferCaps: past MaxTransfers open transfers, or past
// MaxPendingBytes declared by them together (no quota set), a creation is
// refused with 429 and the limit's code, counted in the limit metric;
// finishing a transfer frees its share.
func TestTransferCaps(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.MaxTransfers = 2; c.MaxPendingBytes = 3000 })
	tok := ts.Register(t, "a@example.org")
	up := ts.OpenUpload(t, tok.Access, ts.NewAlbum(t, tok.Access))
	create := func(data []byte) *Response {
		return ts.Do(t, Req{Method: "POST", Path: "/v1/uploads/" + up + "/tus", Token: tok.Access,
			Header: tusHeaders("Upload-Length", strconv.Itoa(len(data)), "Upload-Metadata", tusMetadata(servertest.HashOf(data)))})
	}
	a, b, c := randomData(2000), randomData(1001), randomData(1000)
	loc := create(a).WantStatus(t, http.StatusCreated).Header.Get("Location")
	r := create(b)
	r.WantProblem(t, http.StatusTooManyRequests, "error.limit.pending_bytes")
	wantHeader(t, r, "Retry-After", "3600")
	create(c).WantStatus(t, http.StatusCreated)
	r = create(randomData(1))
	r.WantProblem(t, http.StatusTooManyRequests, "error.limit.transfers")
	wantHeader(t, r, "Retry-After", "3600")
	ts.WantMetric(t, `sealbox_limit_refusals_total{limit="max-pending-bytes"} 1`,
		`sealbox_limit_refusals_total{limit="max-transfers"} 1`)
	ts.TusPatch(t, tok.Access, loc, 0, a).WantStatus(t, http.StatusNoContent)
	create(randomData(1)).WantStatus(t, http.StatusCreated)
}
