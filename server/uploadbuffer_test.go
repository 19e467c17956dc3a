package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"sealbox/blobs/s3"
	"sealbox/server"
	"sealbox/server/servertest"
)

// reserved is the server's sealbox_upload_buffer_bytes.
func reserved(t *testing.T, ts *TestServer) int64 {
	t.Helper()
	rec := httptest.NewRecorder()
	ts.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for line := range strings.Lines(rec.Body.String()) {
		if v, ok := strings.CutPrefix(line, "sealbox_upload_buffer_bytes "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return int64(f)
		}
	}
	t.Fatal("no sealbox_upload_buffer_bytes in the metrics")
	return 0
}

// heldPut starts a blob PUT of data whose body sends its first sent bytes
// and then waits; it returns the function that sends the rest and returns
// the answer's status.
func heldPut(t *testing.T, ts *TestServer, access, uploadID string, data []byte, sent int) (finish func() int) {
	t.Helper()
	pr, pw := io.Pipe()
	req, _ := http.NewRequestWithContext(context.Background(), "PUT", ts.URL()+"/v1/uploads/"+uploadID+"/blobs/"+servertest.HashOf(data), pr)
	req.ContentLength = int64(len(data))
	req.Header.Set("Authorization", "Bearer "+access)
	req.Header.Set("Content-Type", "application/octet-stream")
	status := make(chan int, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			status <- 0
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	if _, err := pw.Write(data[:sent]); err != nil {
		t.Fatal(err)
	}
	finished := false
	t.Cleanup(func() {
		if !finished {
			pw.CloseWithError(io.ErrClosedPipe)
			<-status
		}
	})
	return func() int {
		finished = true
		if _, err := pw.Write(data[sent:]); err != nil {
			t.Fatal(err)
		}
		pw.Close()
		return <-status
	}
}

// TestUploadBufferLimits: an upload reserves the memory it may hold for its
// body before reading it. While one account's stalled upload holds its
// share (here, limits of one byte: one upload at a time), that account's
// next PUT or PATCH is 429 error.limit.upload_buffer, another account's
// 503 error.limit.upload_buffer_total, both with Retry-After and counted by
// their flag; once the stalled upload ends, uploads are taken again.
func TestUploadBufferLimits(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.UploadBufferAccount, c.UploadBufferTotal = 1, 1 })
	alice, bob := ts.Register(t, "alice@example.org"), ts.Register(t, "bob@example.org")
	aliceUp := ts.OpenUpload(t, alice.Access, ts.NewAlbum(t, alice.Access))
	bobUp := ts.OpenUpload(t, bob.Access, ts.NewAlbum(t, bob.Access))
	small := randomData(100)
	loc := ts.TusCreate(t, alice.Access, aliceUp, small)

	big := randomData(2 << 20)
	finish := heldPut(t, ts, alice.Access, aliceUp, big, 64<<10)
	for deadline := time.Now().Add(10 * time.Second); reserved(t, ts) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stalled PUT reserved nothing")
		}
	}
	// 16 KiB inline head and what the engine's Put of 2 MiB holds: the
	// files engine's 1 MiB copy buffer; on S3 the 2 MiB (and one byte), not
	// an 8 MiB part.
	want := int64(16<<10 + 1 + 1<<20)
	if _, onS3 := ts.Blobs.(*s3.Engine); onS3 {
		want = 16<<10 + 1 + 2<<20 + 1
	}
	if got := reserved(t, ts); got != want {
		t.Fatalf("reserved by the stalled PUT: got %d, want %d", got, want)
	}

	put := func(access, uploadID string, data []byte) *Response {
		return ts.Do(t, Req{Method: "PUT", Path: "/v1/uploads/" + uploadID + "/blobs/" + servertest.HashOf(data), Token: access, Body: data, ContentType: "application/octet-stream"})
	}
	for _, r := range []*Response{put(alice.Access, aliceUp, small), ts.TusPatch(t, alice.Access, loc, 0, small)} {
		p := r.WantProblem(t, http.StatusTooManyRequests, "error.limit.upload_buffer")
		if r.Header.Get("Retry-After") != "5" {
			t.Fatalf("Retry-After: got %q, want 5", r.Header.Get("Retry-After"))
		}
		if p["detail"] != "this account's uploads in flight hold all the memory one account may use for them; retry when one has ended" {
			t.Fatalf("detail: %v", p["detail"])
		}
	}
	r := put(bob.Access, bobUp, small)
	p := r.WantProblem(t, http.StatusServiceUnavailable, "error.limit.upload_buffer_total")
	if r.Header.Get("Retry-After") != "5" || p["detail"] != "the uploads in flight hold all the memory the server gives them; retry" {
		t.Fatalf("Retry-After %q, detail %v", r.Header.Get("Retry-After"), p["detail"])
	}
	ts.WantMetric(t, `sealbox_limit_refusals_total{limit="upload-buffer-account"} 2`, `sealbox_limit_refusals_total{limit="upload-buffer-total"} 1`)

	if got := finish(); got != http.StatusCreated {
		t.Fatalf("the stalled PUT, once finished: %d", got)
	}
	if got := reserved(t, ts); got != 0 {
		t.Fatalf("reserved once no upload is in flight: %d", got)
	}
	put(alice.Access, aliceUp, small).WantStatus(t, http.StatusCreated)
	ts.TusPatch(t, alice.Access, loc, 0, small).WantStatus(t, http.StatusNoContent)
	put(bob.Access, bobUp, small).WantStatus(t, http.StatusCreated)
}

// TestUploadBufferSmallPutReservesItsLength: a PUT that announces a body
// the store keeps inline reserves that length, not the engine's buffer, so
// an account's share takes many of them.
func TestUploadBufferSmallPutReservesItsLength(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	up := ts.OpenUpload(t, tok.Access, ts.NewAlbum(t, tok.Access))
	finish := heldPut(t, ts, tok.Access, up, randomData(1000), 10)
	for deadline := time.Now().Add(10 * time.Second); reserved(t, ts) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stalled PUT reserved nothing")
		}
	}
	if got := reserved(t, ts); got != 1000 {
		t.Fatalf("reserved by a stalled 1000-byte PUT: got %d, want 1000", got)
	}
	if got := finish(); got != http.StatusCreated {
		t.Fatalf("the stalled PUT, once finished: %d", got)
	}
}

// TestUploadBufferPutReservesWhatItHolds: a 64 KiB PUT, past the inline
// size, reserves its inline head and a buffer of its own length (and one
// byte), on every blob engine: not the files engine's 1 MiB copy buffer,
// nor an 8 MiB S3 part, which let one account's share take two PUTs on S3
// (issue 41). Its share then takes the 32 PUTs of a client uploading
// several files at once.
func TestUploadBufferPutReservesWhatItHolds(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	up := ts.OpenUpload(t, tok.Access, ts.NewAlbum(t, tok.Access))
	finish := heldPut(t, ts, tok.Access, up, randomData(64<<10), 10)
	for deadline := time.Now().Add(10 * time.Second); reserved(t, ts) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stalled PUT reserved nothing")
		}
	}
	if got, want := reserved(t, ts), int64(16<<10+1+64<<10+1); got != want {
		t.Fatalf("reserved by a stalled 64 KiB PUT: got %d, want %d", got, want)
	}
	if got := finish(); got != http.StatusCreated {
		t.Fatalf("the stalled PUT, once finished: %d", got)
	}
}

// TestUploadBufferPatchReservesWhatItHolds: a PATCH of a 64 KiB transfer
// reserves a copy buffer of the bytes the transfer has left, not 1 MiB,
// and what the engine's partial holds of them: nothing on files, the 64 KiB
// on S3, not an 8 MiB part.
func TestUploadBufferPatchReservesWhatItHolds(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	up := ts.OpenUpload(t, tok.Access, ts.NewAlbum(t, tok.Access))
	data := randomData(64 << 10)
	loc := ts.TusCreate(t, tok.Access, up, data)
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("PATCH", ts.URL()+loc, pr)
	req.ContentLength = int64(len(data))
	for k, v := range tusHeaders("Upload-Offset", "0", "Content-Type", "application/offset+octet-stream") {
		req.Header.Set(k, v)
	}
	req.Header.Set("Authorization", "Bearer "+tok.Access)
	status := make(chan int, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			status <- 0
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	pw.Write(data[:10])
	for deadline := time.Now().Add(10 * time.Second); reserved(t, ts) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			pw.CloseWithError(io.ErrClosedPipe)
			t.Fatal("the stalled PATCH reserved nothing")
		}
	}
	partial := int64(0) // the files engine writes a partial's bytes straight to its file
	if _, onS3 := ts.Blobs.(*s3.Engine); onS3 {
		partial = 64 << 10 // the part under way: the 64 KiB, not 8 MiB
	}
	if got, want := reserved(t, ts), int64(64<<10)+partial; got != want {
		pw.CloseWithError(io.ErrClosedPipe)
		t.Fatalf("reserved by a stalled PATCH of 64 KiB: got %d, want %d", got, want)
	}
	pw.Write(data[10:])
	pw.Close()
	if got := <-status; got != http.StatusNoContent {
		t.Fatalf("the stalled PATCH, once finished: %d", got)
	}
}
