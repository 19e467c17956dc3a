package server_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"sealbox/server"
	"sealbox/server/servertest"
)

// bigShare registers a share link serving a blob of size bytes and returns
// the path that reads it.
func bigShare(t testing.TB, ts *TestServer, size int) string {
	t.Helper()
	tok := ts.Register(t, fmt.Sprintf("big%d@example.org", size))
	blob := bytes.Repeat([]byte("sealed "), size/7+1)[:size]
	ts.Upload(t, tok.Access, blob)
	l := ts.newLink(t, tok.Access, func(body map[string]any) {
		body["serves"] = []string{body["metadata_hash"].(string), servertest.HashOf(blob)}
	})
	return "/s/" + l.id + "/blob/" + servertest.HashOf(blob)
}

// rawGet opens a connection with a small receive buffer, sends a GET of
// path and returns the connection with the response still to be read.
func rawGet(t testing.TB, ts *TestServer, path string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.(*net.TCPConn).SetReadBuffer(64 << 10)
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: sealbox\r\n\r\n", path)
	return conn
}

// TestWriteStall: a response write that makes no progress for WriteStall
// ends the connection (counted under write-stall), while a slow reader
// that keeps taking bytes gets the whole body.
func TestWriteStall(t *testing.T) {
	// More than the kernel buffers on both ends of a loopback connection
	// (the server's send buffer grows to 4 MiB), so the server's writes
	// block when the client stops reading.
	const size = 6 << 20
	// A blocked writer wakes when half its send buffer has drained: 2 MiB,
	// which the slow reader below takes in 400 ms.
	ts := MustOpenServer(t, func(c *server.Config) { c.WriteStall = time.Second })
	path := bigShare(t, ts, size)

	slow := rawGet(t, ts, path)
	resp, err := http.ReadResponse(bufio.NewReader(slow), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for {
		n, err := io.CopyN(io.Discard, resp.Body, 512<<10)
		got += int(n)
		if err != nil {
			break
		}
		time.Sleep(100 * time.Millisecond) // 5 MiB/s: slow, but live
	}
	if got != size {
		t.Fatalf("the slow reader got %d of %d bytes", got, size)
	}

	stalled := rawGet(t, ts, path)
	time.Sleep(2500 * time.Millisecond) // reads nothing: the server's writes stall
	stalled.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, _ := io.Copy(io.Discard, stalled)
	if n >= size {
		t.Fatalf("the stalled reader got all %d bytes; want the connection cut", n)
	}
	ts.WantMetric(t, `sealbox_limit_refusals_total{limit="write-stall"} 1`)
}

// TestAnonymousBodies: a route anyone may call has a body limit fitting its
// largest valid body, and the whole body must arrive within
// AnonBodyTimeout, else the connection is cut (counted under
// anon-body-timeout).
func TestAnonymousBodies(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.AnonBodyTimeout = 300 * time.Millisecond })
	oversized := func(path string, size int) servertest.Scenario {
		return servertest.Scenario{Name: path, Method: "POST", Path: path, Body: `{"x":"` + strings.Repeat("a", size) + `"}`,
			WantStatus: http.StatusRequestEntityTooLarge}
	}
	servertest.RunScenarios(t, ts.Client, []servertest.Scenario{
		oversized("/v1/auth/login", 16<<10+1),
		oversized("/v1/auth/register", 16<<10+1),
		oversized("/v1/auth/refresh", 16<<10+1),
		oversized("/v1/auth/devices/enroll/redeem", 16<<10+1),
		oversized("/v1/auth/devices/enroll/channel/sbx_rl_"+strings.Repeat("a", 43), 68<<10+1),
	})
	// A valid login body still fits.
	ts.Register(t, "a@example.org")
	ts.Login(t, "a@example.org")

	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST /v1/auth/login HTTP/1.1\r\nHost: sealbox\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"email\"")
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	io.Copy(io.Discard, conn) // until the server cuts the connection
	if waited := time.Since(start); waited > 3*time.Second {
		t.Fatalf("a stalled login body held its connection for %v", waited)
	}
	ts.WantMetric(t, `sealbox_limit_refusals_total{limit="anon-body-timeout"} 1`)
}

// TestMaxBodyCapsEveryRoute: --max-body caps the routes without a token as
// it caps the others: with 4096 bytes, a 5 KB register body (with its
// Content-Length) and an 8 KB chunked login body answer 413 with an empty
// body and nosniff, though both are under the routes' own 16 KiB, and so does
// a 5 KB escrow upload (own limit 64 KiB). A lifecycle op keeps its own
// 32 MiB bound: its 5 KB body is read and judged (400), not refused for size.
func TestMaxBodyCapsEveryRoute(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.MaxBody = 4096 })
	tok := ts.Register(t, "a@example.org")
	album := ts.NewAlbum(t, tok.Access)
	filler := func(n int) []byte {
		return []byte(`{"email":"a@example.org","password":"` + strings.Repeat("p", n) + `"}`)
	}
	send := func(method, path, contentType string, body []byte, chunked bool) (*http.Response, []byte) {
		t.Helper()
		var r io.Reader = bytes.NewReader(body)
		if chunked {
			r = io.MultiReader(r) // hides the length: sent chunked
		}
		req, _ := http.NewRequest(method, ts.URL()+path, r)
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Authorization", "Bearer "+tok.Access)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, got
	}
	for _, tc := range []struct {
		name, method, path, contentType string
		body                            []byte
		chunked                         bool
	}{
		{"register, 5 KB with its length", "POST", "/v1/auth/register", "application/json", filler(5000), false},
		{"login, 8 KB chunked", "POST", "/v1/auth/login", "application/json", filler(8000), true},
		{"escrow, 5 KB", "PUT", "/v1/auth/escrow", "application/octet-stream", bytes.Repeat([]byte("e"), 5000), false},
	} {
		resp, got := send(tc.method, tc.path, tc.contentType, tc.body, tc.chunked)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || len(got) != 0 || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: got %d, nosniff %q, with %d body bytes %q; want 413, nosniff, no body", tc.name,
				resp.StatusCode, resp.Header.Get("X-Content-Type-Options"), len(got), got)
		}
	}
	op := []byte(`{"x":"` + strings.Repeat("o", 5000) + `"}`)
	resp, got := send("POST", "/v1/albums/"+album+"/ops", "application/json", op, false)
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a 5 KB lifecycle op: got %d %s, want 400 (judged, not refused for size)", resp.StatusCode, got)
	}
}

// TestWriteStallSpansNoUpload: the write deadline starts at the answer, not
// at the request, so a 204 after a body that took longer than WriteStall to
// arrive (a tus PATCH over a slow uplink) still reaches the client.
func TestWriteStallSpansNoUpload(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.WriteStall = 200 * time.Millisecond })
	tok := ts.Register(t, "slow@example.org")
	data := bytes.Repeat([]byte("u"), 1000)
	location := ts.TusCreate(t, tok.Access, ts.OpenUpload(t, tok.Access, ts.NewAlbum(t, tok.Access)), data)
	pr, pw := io.Pipe()
	go func() {
		for i := range 10 { // a second in all: five times the stall limit
			pw.Write(data[i*100 : (i+1)*100])
			time.Sleep(100 * time.Millisecond)
		}
		pw.Close()
	}()
	req, _ := http.NewRequest("PATCH", ts.URL()+location, pr)
	req.Header.Set("Authorization", "Bearer "+tok.Access)
	req.Header.Set("Content-Type", "application/offset+octet-stream")
	req.Header.Set("Tus-Resumable", "1.0.0")
	req.Header.Set("Upload-Offset", "0")
	req.ContentLength = int64(len(data))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("the answer to a slow upload: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("status %d, want 204", resp.StatusCode)
	}
}

// TestShareBlobReadsOnOneConnection: a range over several write chunks, a
// HEAD and a conditional GET, one after another on one kept-alive
// connection, each answered with its exact status, headers and bytes:
// the header that goes out before the body frames the
// answer as net/http would have, and the connection is left ready for the
// next request.
func TestShareBlobReadsOnOneConnection(t *testing.T) {
	const size = 200 << 10
	ts := MustOpenServer(t)
	path := bigShare(t, ts, size)
	blob := bytes.Repeat([]byte("sealed "), size/7+1)[:size]
	etag := `"` + servertest.HashOf(blob) + `"`
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	// one sends every row on that connection: a second dial fails the row.
	dialed := false
	one := servertest.Client{BaseURL: ts.URL(), HTTP: &http.Client{Transport: &http.Transport{
		DisableCompression: true,
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			if dialed {
				return nil, errors.New("a second connection")
			}
			dialed = true
			return conn, nil
		},
	}}}
	for _, tc := range []struct {
		servertest.Scenario
		wantHeader map[string]string
		body       []byte
	}{
		{servertest.Scenario{Name: "range over chunks", Method: "GET", Header: map[string]string{"Range": "bytes=1000-140999"}, WantStatus: http.StatusPartialContent},
			map[string]string{"Content-Range": fmt.Sprintf("bytes 1000-140999/%d", size), "Content-Length": "140000", "Content-Type": "application/octet-stream", "Etag": etag, "Accept-Ranges": "bytes"},
			blob[1000:141000]},
		{servertest.Scenario{Name: "whole", Method: "GET", WantStatus: http.StatusOK},
			map[string]string{"Content-Length": fmt.Sprint(size), "Content-Type": "application/octet-stream", "Etag": etag},
			blob},
		{servertest.Scenario{Name: "head of a range", Method: "HEAD", Header: map[string]string{"Range": "bytes=0-99"}, WantStatus: http.StatusPartialContent},
			map[string]string{"Content-Range": fmt.Sprintf("bytes 0-99/%d", size), "Content-Length": "100", "Etag": etag},
			nil},
		{servertest.Scenario{Name: "several ranges", Method: "GET", Header: map[string]string{"Range": "bytes=0-9,100000-100009"}, WantStatus: http.StatusPartialContent},
			map[string]string{"Etag": etag},
			nil},
		{servertest.Scenario{Name: "not modified", Method: "GET", Header: map[string]string{"If-None-Match": etag}, WantStatus: http.StatusNotModified},
			map[string]string{"Etag": etag},
			nil},
		{servertest.Scenario{Name: "suffix after a 304", Method: "GET", Header: map[string]string{"Range": "bytes=-10"}, WantStatus: http.StatusPartialContent},
			map[string]string{"Content-Range": fmt.Sprintf("bytes %d-%d/%d", size-10, size-1, size), "Content-Length": "10"},
			blob[size-10:]},
	} {
		sc := tc.Scenario
		sc.Path = path
		sc.Teardown = func(tb testing.TB, _ servertest.Scenario, r *Response) {
			for k, want := range tc.wantHeader {
				if got := r.Header.Get(k); got != want {
					tb.Errorf("%s: %s %q, want %q", tc.Name, k, got, want)
				}
			}
			if tc.Name == "several ranges" {
				if !strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/byteranges") || !bytes.Contains(r.Body, blob[100000:100010]) {
					tb.Errorf("%s: %s with %d bytes, want multipart/byteranges holding both", tc.Name, r.Header.Get("Content-Type"), len(r.Body))
				}
				return
			}
			if !bytes.Equal(r.Body, tc.body) {
				tb.Errorf("%s: %d bytes, want %d exactly", tc.Name, len(r.Body), len(tc.body))
			}
		}
		sc.Test(t, one)
	}
}
