package blobhttp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"sealbox/blobs/s3"
	"sealbox/blobs/s3test"
)

func TestMain(m *testing.M) {
	code := m.Run()
	s3test.Stop()
	os.Exit(code)
}

// requestCounter counts S3 requests by operation (s3.Options.Observe).
type requestCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *requestCounter) observe(op string, _ time.Duration, _ error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[op]++
}

func (c *requestCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

// TestServeS3: a blob read from S3 through OpenSized gets, request by
// request, exactly the answer of the same blob read from memory, and costs
// no HEAD and one ranged GET per range sent (none for HEAD, 304 or an empty
// body).
func TestServeS3(t *testing.T) {
	if !s3test.Enabled() {
		t.Skip("SEALBOX_TEST_S3 is unset")
	}
	counter := &requestCounter{n: map[string]int{}}
	store, err := s3.Open(context.Background(), s3test.URL(t), s3.Options{Observe: counter.observe})
	if err != nil {
		t.Fatal(err)
	}
	for _, blob := range [][]byte{testBlob, {}} {
		info, _, err := store.Put(bytes.NewReader(blob), "", 0)
		if err != nil {
			t.Fatal(err)
		}
		tag := `"` + info.Hash + `"`
		for _, c := range []struct {
			header http.Header
			gets   int // for a GET of testBlob
		}{
			{http.Header{}, 1},
			{http.Header{"Range": {"bytes=0-9"}}, 1},
			{http.Header{"Range": {"bytes=-5"}}, 1},
			{http.Header{"Range": {"bytes=90-1000"}}, 1},
			{http.Header{"Range": {"bytes=0-9,20-29,95-"}}, 3},
			{http.Header{"Range": {"bytes=200-300"}}, 1},
			{http.Header{"If-None-Match": {tag}}, 0},
			{http.Header{"If-None-Match": {`"other"`}, "Range": {"bytes=3-4"}}, 1},
			{http.Header{"If-Range": {tag}, "Range": {"bytes=3-4,7-8"}}, 2},
		} {
			for _, method := range []string{http.MethodGet, http.MethodHead} {
				t.Run(fmt.Sprintf("%s/%d/%v", method, len(blob), c.header), func(t *testing.T) {
					counter.take()
					f, err := store.OpenSized(info.Hash, info.Size)
					if err != nil {
						t.Fatal(err)
					}
					defer f.Close()
					got := serveFrom(t, method, c.header, info.Hash, f, info.Size)
					want := serveFrom(t, method, c.header, info.Hash, bytes.NewReader(blob), info.Size)
					if got.StatusCode != want.StatusCode {
						t.Errorf("status %d, from memory %d", got.StatusCode, want.StatusCode)
					}
					gotBody, wantBody := withoutBoundary(t, got), withoutBoundary(t, want)
					if !bytes.Equal(gotBody, wantBody) {
						t.Errorf("body %q, from memory %q", gotBody, wantBody)
					}
					if !maps.EqualFunc(got.Header, want.Header, slices.Equal) {
						t.Errorf("header %v, from memory %v", got.Header, want.Header)
					}
					wantGets := c.gets
					if method == http.MethodHead || len(blob) == 0 {
						wantGets = 0
					}
					if n := counter.take(); n["GetObject"] != wantGets || len(n) > min(wantGets, 1) {
						t.Errorf("S3 requests %v, want %d GetObject and nothing else", n, wantGets)
					}
				})
			}
		}
	}
}

func serveFrom(t *testing.T, method string, header http.Header, hash string, content io.ReadSeeker, size int64) *http.Response {
	t.Helper()
	r := httptest.NewRequest(method, "/s/link/blob/"+hash, nil)
	maps.Copy(r.Header, header)
	w := httptest.NewRecorder()
	Serve(w, r, content, size, hash, testModTime)
	return w.Result()
}

// withoutBoundary returns resp's body with its multipart boundary, which is
// random, replaced by a fixed one in the body and the Content-Type header.
func withoutBoundary(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	_, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if b := params["boundary"]; err == nil && b != "" {
		body = bytes.ReplaceAll(body, []byte(b), []byte("BOUNDARY"))
		resp.Header.Set("Content-Type", strings.ReplaceAll(resp.Header.Get("Content-Type"), b, "BOUNDARY"))
	}
	return body
}
