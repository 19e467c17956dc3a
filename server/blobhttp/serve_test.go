package blobhttp

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

const testHash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

var (
	// testModTime has sub-second precision to check that Last-Modified and the
	// date conditions work on whole seconds.
	testModTime = time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.UTC)
	testBlob    = makeBlob(100)
)

const testLastModified = "Sun, 22 Nov 2026 10:00:00 GMT"

func makeBlob(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// serve runs Serve on blob for one request and returns the recorded response.
func serve(t *testing.T, method string, header http.Header, blob []byte) *http.Response {
	t.Helper()
	r := httptest.NewRequest(method, "/s/link/blob/"+testHash, nil)
	maps.Copy(r.Header, header)
	w := httptest.NewRecorder()
	Serve(w, r, bytes.NewReader(blob), int64(len(blob)), testHash, testModTime)
	return w.Result()
}

// wantHeader is the exact header set of an answer with the given status, body
// length and Content-Range.
func wantHeader(status int, length int, contentRange string) http.Header {
	h := http.Header{
		"Etag":          {`"` + testHash + `"`},
		"Last-Modified": {testLastModified},
		"Accept-Ranges": {"bytes"},
		"Cache-Control": {"private, no-cache"},
	}
	if status == http.StatusNotModified {
		return h
	}
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.Itoa(length))
	if contentRange != "" {
		h.Set("Content-Range", contentRange)
	}
	return h
}

func TestServe(t *testing.T) {
	full := wantHeader(http.StatusOK, 100, "")
	notModified := wantHeader(http.StatusNotModified, 0, "")
	for _, tt := range []struct {
		name       string
		method     string // GET when empty
		header     http.Header
		blob       []byte // testBlob when nil
		wantStatus int
		wantHeader http.Header
		wantBody   []byte
	}{
		{name: "full", wantStatus: 200, wantHeader: full, wantBody: testBlob},
		{name: "head", method: http.MethodHead, wantStatus: 200, wantHeader: full},
		{
			name: "zero-length blob", blob: []byte{},
			wantStatus: 200, wantHeader: wantHeader(200, 0, ""), wantBody: []byte{},
		},

		// Ranges that apply.
		{
			name: "single range", header: http.Header{"Range": {"bytes=10-19"}},
			wantStatus: 206, wantHeader: wantHeader(206, 10, "bytes 10-19/100"), wantBody: testBlob[10:20],
		},
		{
			name: "suffix range", header: http.Header{"Range": {"bytes=-5"}},
			wantStatus: 206, wantHeader: wantHeader(206, 5, "bytes 95-99/100"), wantBody: testBlob[95:],
		},
		{
			name: "suffix longer than blob", header: http.Header{"Range": {"bytes=-500"}},
			wantStatus: 206, wantHeader: wantHeader(206, 100, "bytes 0-99/100"), wantBody: testBlob,
		},
		{
			name: "open-ended range", header: http.Header{"Range": {"bytes=90-"}},
			wantStatus: 206, wantHeader: wantHeader(206, 10, "bytes 90-99/100"), wantBody: testBlob[90:],
		},
		{
			name: "last-pos past the end is clamped", header: http.Header{"Range": {"bytes=95-1000"}},
			wantStatus: 206, wantHeader: wantHeader(206, 5, "bytes 95-99/100"), wantBody: testBlob[95:],
		},
		{
			// net/http alone answers 416: strconv.ParseInt overflows.
			name: "last-pos beyond int64", header: http.Header{"Range": {"bytes=0-99999999999999999999"}},
			wantStatus: 206, wantHeader: wantHeader(206, 100, "bytes 0-99/100"), wantBody: testBlob,
		},
		{
			// net/http alone answers 416: it wants "bytes=" in lower case.
			name: "unit is case-insensitive", header: http.Header{"Range": {"Bytes=0-0"}},
			wantStatus: 206, wantHeader: wantHeader(206, 1, "bytes 0-0/100"), wantBody: testBlob[:1],
		},
		{
			name: "unsatisfiable spec dropped from the set", header: http.Header{"Range": {"bytes=1000-2000, 0-1"}},
			wantStatus: 206, wantHeader: wantHeader(206, 2, "bytes 0-1/100"), wantBody: testBlob[:2],
		},
		{
			name: "head with range", method: http.MethodHead, header: http.Header{"Range": {"bytes=0-9"}},
			wantStatus: 206, wantHeader: wantHeader(206, 10, "bytes 0-9/100"),
		},

		// Ranges that are ignored: the whole blob, 200, never 416.
		{name: "malformed: not numbers", header: http.Header{"Range": {"bytes=abc"}}, wantStatus: 200, wantHeader: full, wantBody: testBlob},
		{name: "malformed: unknown unit", header: http.Header{"Range": {"items=0-1"}}, wantStatus: 200, wantHeader: full, wantBody: testBlob},
		{name: "malformed: last before first", header: http.Header{"Range": {"bytes=5-2"}}, wantStatus: 200, wantHeader: full, wantBody: testBlob},
		{name: "malformed: empty set", header: http.Header{"Range": {"bytes="}}, wantStatus: 200, wantHeader: full, wantBody: testBlob},
		{name: "malformed: sign", header: http.Header{"Range": {"bytes=+1-2"}}, wantStatus: 200, wantHeader: full, wantBody: testBlob},
		{name: "malformed: one bad spec spoils the set", header: http.Header{"Range": {"bytes=0-1,x"}}, wantStatus: 200, wantHeader: full, wantBody: testBlob},
		{name: "unsatisfiable first-pos", header: http.Header{"Range": {"bytes=1000-"}}, wantStatus: 200, wantHeader: full, wantBody: testBlob},
		{name: "unsatisfiable first-pos at size", header: http.Header{"Range": {"bytes=100-100"}}, wantStatus: 200, wantHeader: full, wantBody: testBlob},
		{name: "unsatisfiable zero suffix", header: http.Header{"Range": {"bytes=-0"}}, wantStatus: 200, wantHeader: full, wantBody: testBlob},
		{
			// net/http's own rule: ranges adding up to more than the blob.
			name: "ranges larger than the blob", header: http.Header{"Range": {"bytes=0-99,0-0"}},
			wantStatus: 200, wantHeader: full, wantBody: testBlob,
		},
		{
			name: "more than maxRanges", header: http.Header{"Range": {"bytes=" + strings.Repeat("0-0,", maxRanges+1)}},
			wantStatus: 200, wantHeader: full, wantBody: testBlob,
		},
		{
			// net/http alone answers 206 with "Content-Range: bytes 0--1/0".
			name: "suffix range of zero-length blob", header: http.Header{"Range": {"bytes=-5"}}, blob: []byte{},
			wantStatus: 200, wantHeader: wantHeader(200, 0, ""), wantBody: []byte{},
		},
		{
			name: "range of zero-length blob", header: http.Header{"Range": {"bytes=0-"}}, blob: []byte{},
			wantStatus: 200, wantHeader: wantHeader(200, 0, ""), wantBody: []byte{},
		},

		// Conditional requests.
		{name: "if-none-match", header: http.Header{"If-None-Match": {`"` + testHash + `"`}}, wantStatus: 304, wantHeader: notModified, wantBody: []byte{}},
		{name: "if-none-match weak", header: http.Header{"If-None-Match": {`W/"` + testHash + `"`}}, wantStatus: 304, wantHeader: notModified, wantBody: []byte{}},
		{name: "if-none-match list", header: http.Header{"If-None-Match": {`"other", "` + testHash + `"`}}, wantStatus: 304, wantHeader: notModified, wantBody: []byte{}},
		{name: "if-none-match star", header: http.Header{"If-None-Match": {"*"}}, wantStatus: 304, wantHeader: notModified, wantBody: []byte{}},
		{name: "if-none-match head", method: http.MethodHead, header: http.Header{"If-None-Match": {"*"}}, wantStatus: 304, wantHeader: notModified},
		{name: "if-none-match mismatch", header: http.Header{"If-None-Match": {`"other"`}}, wantStatus: 200, wantHeader: full, wantBody: testBlob},
		{
			name:       "if-none-match with range",
			header:     http.Header{"If-None-Match": {`"` + testHash + `"`}, "Range": {"bytes=0-9"}},
			wantStatus: 304, wantHeader: notModified, wantBody: []byte{},
		},
		{
			name:       "if-modified-since later",
			header:     http.Header{"If-Modified-Since": {"Mon, 23 Nov 2026 00:00:00 GMT"}},
			wantStatus: 304, wantHeader: notModified, wantBody: []byte{},
		},
		{
			name:       "if-modified-since equal to the truncated time",
			header:     http.Header{"If-Modified-Since": {testLastModified}},
			wantStatus: 304, wantHeader: notModified, wantBody: []byte{},
		},
		{
			name:       "if-modified-since earlier",
			header:     http.Header{"If-Modified-Since": {"Sat, 21 Nov 2026 00:00:00 GMT"}},
			wantStatus: 200, wantHeader: full, wantBody: testBlob,
		},
		{
			// RFC 9110 section 13.1.3: If-Modified-Since is ignored when If-None-Match is present.
			name:       "if-none-match mismatch wins over if-modified-since",
			header:     http.Header{"If-None-Match": {`"other"`}, "If-Modified-Since": {"Mon, 23 Nov 2026 00:00:00 GMT"}},
			wantStatus: 200, wantHeader: full, wantBody: testBlob,
		},
		{
			name:       "if-range strong match",
			header:     http.Header{"If-Range": {`"` + testHash + `"`}, "Range": {"bytes=0-9"}},
			wantStatus: 206, wantHeader: wantHeader(206, 10, "bytes 0-9/100"), wantBody: testBlob[:10],
		},
		{
			name:       "if-range weak tag",
			header:     http.Header{"If-Range": {`W/"` + testHash + `"`}, "Range": {"bytes=0-9"}},
			wantStatus: 200, wantHeader: full, wantBody: testBlob,
		},
		{
			name:       "if-range other tag",
			header:     http.Header{"If-Range": {`"other"`}, "Range": {"bytes=0-9"}},
			wantStatus: 200, wantHeader: full, wantBody: testBlob,
		},
		{
			// net/http alone answers 206: it honours a date equal to
			// Last-Modified, where the interface honours only the tag.
			name:       "if-range matching date",
			header:     http.Header{"If-Range": {testLastModified}, "Range": {"bytes=0-9"}},
			wantStatus: 200, wantHeader: full, wantBody: testBlob,
		},
		{
			name:       "if-range matching date in RFC 850 form",
			header:     http.Header{"If-Range": {"Sunday, 22-Nov-26 10:00:00 GMT"}, "Range": {"bytes=0-9"}},
			wantStatus: 200, wantHeader: full, wantBody: testBlob,
		},
		{
			// net/http alone answers 206: it reads the first tag and ignores the rest.
			name:       "if-range tag followed by more",
			header:     http.Header{"If-Range": {`"` + testHash + `", "other"`}, "Range": {"bytes=0-9"}},
			wantStatus: 200, wantHeader: full, wantBody: testBlob,
		},
		{
			name:       "if-range other date",
			header:     http.Header{"If-Range": {"Mon, 23 Nov 2026 00:00:00 GMT"}, "Range": {"bytes=0-9"}},
			wantStatus: 200, wantHeader: full, wantBody: testBlob,
		},
		{
			name:       "if-range garbage",
			header:     http.Header{"If-Range": {"garbage"}, "Range": {"bytes=0-9"}},
			wantStatus: 200, wantHeader: full, wantBody: testBlob,
		},
		{
			name:       "if-range without range",
			header:     http.Header{"If-Range": {`"` + testHash + `"`}},
			wantStatus: 200, wantHeader: full, wantBody: testBlob,
		},
		{
			// Ignored, so never 412 (see contractRequest).
			name:       "if-match mismatch ignored",
			header:     http.Header{"If-Match": {`"other"`}},
			wantStatus: 200, wantHeader: full, wantBody: testBlob,
		},
		{
			name:       "if-unmodified-since earlier ignored",
			header:     http.Header{"If-Unmodified-Since": {"Sat, 21 Nov 2026 00:00:00 GMT"}, "Range": {"bytes=0-9"}},
			wantStatus: 206, wantHeader: wantHeader(206, 10, "bytes 0-9/100"), wantBody: testBlob[:10],
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			method := cmp.Or(tt.method, http.MethodGet)
			blob := tt.blob
			if blob == nil {
				blob = testBlob
			}
			resp := serve(t, method, tt.header, blob)
			if got, want := resp.StatusCode, tt.wantStatus; got != want {
				t.Fatalf("status: got %d, want %d", got, want)
			}
			if got, want := resp.Header, tt.wantHeader; !equalHeader(got, want) {
				t.Errorf("header:\n got %v\nwant %v", got, want)
			}
			body, _ := io.ReadAll(resp.Body)
			if got, want := body, tt.wantBody; !bytes.Equal(got, want) {
				t.Errorf("body: got %d bytes %x, want %d bytes %x", len(got), got, len(want), want)
			}
		})
	}
}

func equalHeader(a, b http.Header) bool {
	return maps.EqualFunc(a, b, slices.Equal)
}

func TestServeMultiRange(t *testing.T) {
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		t.Run(method, func(t *testing.T) {
			resp := serve(t, method, http.Header{"Range": {"bytes=0-9, 20-29,-5"}}, testBlob)
			if got, want := resp.StatusCode, http.StatusPartialContent; got != want {
				t.Fatalf("status: got %d, want %d", got, want)
			}
			mediaType, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
			if err != nil || mediaType != "multipart/byteranges" {
				t.Fatalf("Content-Type: got %q (%v), want multipart/byteranges", resp.Header.Get("Content-Type"), err)
			}
			for _, name := range []string{"Etag", "Last-Modified", "Accept-Ranges", "Cache-Control"} {
				if got, want := resp.Header.Get(name), wantHeader(206, 0, "").Get(name); got != want {
					t.Errorf("%s: got %q, want %q", name, got, want)
				}
			}
			if method == http.MethodHead {
				return
			}
			body, _ := io.ReadAll(resp.Body)
			if got, want := resp.Header.Get("Content-Length"), strconv.Itoa(len(body)); got != want {
				t.Errorf("Content-Length: got %s, want %s", got, want)
			}
			checkMultipart(t, body, params["boundary"], []ByteRange{{0, 9}, {20, 29}, {95, 99}}, testBlob)
		})
	}
}

// checkMultipart asserts that body is a multipart/byteranges body holding exactly
// want, in order, cut from blob.
func checkMultipart(t *testing.T, body []byte, boundary string, want []ByteRange, blob []byte) {
	t.Helper()
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	for i := 0; ; i++ {
		part, err := mr.NextPart()
		if err == io.EOF {
			if i != len(want) {
				t.Fatalf("got %d parts, want %d", i, len(want))
			}
			return
		}
		if err != nil {
			t.Fatalf("part %d: %v", i, err)
		}
		if i >= len(want) {
			t.Fatalf("got more than %d parts", len(want))
		}
		ra := want[i]
		if got, want := part.Header.Get("Content-Range"), fmt.Sprintf("bytes %d-%d/%d", ra.Start, ra.End, len(blob)); got != want {
			t.Errorf("part %d Content-Range: got %q, want %q", i, got, want)
		}
		if got, want := part.Header.Get("Content-Type"), "application/octet-stream"; got != want {
			t.Errorf("part %d Content-Type: got %q, want %q", i, got, want)
		}
		data, err := io.ReadAll(part)
		if err != nil {
			t.Fatalf("part %d: %v", i, err)
		}
		if got, want := data, blob[ra.Start:ra.End+1]; !bytes.Equal(got, want) {
			t.Errorf("part %d: got %x, want %x", i, got, want)
		}
	}
}

// readerFromRecorder is a ResponseWriter that, like net/http's, implements
// io.ReaderFrom, and records what it was handed.
type readerFromRecorder struct {
	*httptest.ResponseRecorder
	srcs []io.Reader
}

func (w *readerFromRecorder) ReadFrom(src io.Reader) (int64, error) {
	w.srcs = append(w.srcs, src)
	return io.Copy(w.ResponseRecorder, src)
}

// TestServeKeepsReadFrom shows that the file reaches the writer's ReadFrom, which
// is where net/http switches to sendfile: the wrapper does not hide it.
func TestServeKeepsReadFrom(t *testing.T) {
	path := filepath.Join(t.TempDir(), "blob")
	if err := os.WriteFile(path, testBlob, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		rangeHdr string
		wantBody []byte
	}{
		{"full", "", testBlob},
		{"single range", "bytes=10-19", testBlob[10:20]},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			if tt.rangeHdr != "" {
				r.Header.Set("Range", tt.rangeHdr)
			}
			w := &readerFromRecorder{ResponseRecorder: httptest.NewRecorder()}
			Serve(w, r, f, int64(len(testBlob)), testHash, testModTime)

			if len(w.srcs) != 1 {
				t.Fatalf("ReadFrom called %d times, want 1", len(w.srcs))
			}
			// io.CopyN wraps the source in an io.LimitedReader; net/http's
			// TCPConn.ReadFrom unwraps it to reach the file.
			lr, ok := w.srcs[0].(*io.LimitedReader)
			if !ok || lr.R != f {
				t.Fatalf("ReadFrom got %T, want *io.LimitedReader around the *os.File", w.srcs[0])
			}
			if got, want := w.Body.Bytes(), tt.wantBody; !bytes.Equal(got, want) {
				t.Errorf("body: got %x, want %x", got, want)
			}
		})
	}
}

// TestWrapperUnwrap shows that http.ResponseController reaches the underlying
// writer through the wrapper.
func TestWrapperUnwrap(t *testing.T) {
	rec := httptest.NewRecorder()
	if err := http.NewResponseController(&lastModifiedWriter{ResponseWriter: rec}).Flush(); err != nil {
		t.Fatal(err)
	}
	if !rec.Flushed {
		t.Error("Flush did not reach the underlying writer")
	}
}

// TestServeOverHTTP runs Serve behind a real server and client, where the body
// goes through net/http's own ReadFrom and 304 through its header writer.
func TestServeOverHTTP(t *testing.T) {
	path := filepath.Join(t.TempDir(), "blob")
	if err := os.WriteFile(path, testBlob, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := os.Open(path)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		Serve(w, r, f, int64(len(testBlob)), testHash, testModTime)
	}))
	defer srv.Close()

	for _, tt := range []struct {
		name       string
		header     http.Header
		wantStatus int
		wantBody   []byte
	}{
		{"full", nil, 200, testBlob},
		{"range", http.Header{"Range": {"bytes=-10"}}, 206, testBlob[90:]},
		{"not modified", http.Header{"If-None-Match": {`"` + testHash + `"`}}, 304, []byte{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			maps.Copy(req.Header, tt.header)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := resp.StatusCode, tt.wantStatus; got != want {
				t.Fatalf("status: got %d, want %d", got, want)
			}
			if got, want := resp.Header.Get("Last-Modified"), testLastModified; got != want {
				t.Errorf("Last-Modified: got %q, want %q", got, want)
			}
			if got, want := resp.Header.Get("ETag"), `"`+testHash+`"`; got != want {
				t.Errorf("ETag: got %q, want %q", got, want)
			}
			if got, want := body, tt.wantBody; !bytes.Equal(got, want) {
				t.Errorf("body: got %x, want %x", got, want)
			}
		})
	}
}

// FuzzServeRange checks that ServeContent reads the rewritten Range header as
// ParseRange did: never 416, and 206 exactly when ParseRange found a set that
// Serve keeps, with exactly those bytes.
func FuzzServeRange(f *testing.F) {
	for _, s := range []string{"bytes=0-9", "bytes=-5", "bytes=90-", "bytes=0-0,5-9", "bytes=5-2", "BYTES=1-1", "bytes=0-1,0-99", "bytes=1000-"} {
		f.Add(s, uint16(100))
	}
	f.Add("bytes=-1", uint16(0))
	f.Fuzz(func(t *testing.T, header string, size uint16) {
		blob := makeBlob(int(size % 300))
		ranges, ok := ParseRange(header, int64(len(blob)))
		var sum int64
		for _, ra := range ranges {
			sum += ra.End - ra.Start + 1
		}
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header["Range"] = []string{header}
		w := httptest.NewRecorder()
		Serve(w, r, bytes.NewReader(blob), int64(len(blob)), testHash, testModTime)
		resp := w.Result()
		body, _ := io.ReadAll(resp.Body)

		if !ok || len(ranges) > maxRanges || sum > int64(len(blob)) {
			if resp.StatusCode != http.StatusOK || !bytes.Equal(body, blob) {
				t.Fatalf("Range %q on %d bytes: got %d with %d bytes, want 200 with the blob", header, len(blob), resp.StatusCode, len(body))
			}
			return
		}
		if resp.StatusCode != http.StatusPartialContent {
			t.Fatalf("Range %q on %d bytes: got %d, want 206 for %v", header, len(blob), resp.StatusCode, ranges)
		}
		if len(ranges) == 1 {
			ra := ranges[0]
			if got, want := resp.Header.Get("Content-Range"), fmt.Sprintf("bytes %d-%d/%d", ra.Start, ra.End, len(blob)); got != want {
				t.Errorf("Content-Range: got %q, want %q", got, want)
			}
			if got, want := body, blob[ra.Start:ra.End+1]; !bytes.Equal(got, want) {
				t.Errorf("body: got %x, want %x", got, want)
			}
			return
		}
		_, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		if err != nil {
			t.Fatal(err)
		}
		checkMultipart(t, body, params["boundary"], ranges, blob)
	})
}

func BenchmarkServe1MiB(b *testing.B) {
	benchmarkServe(b, func(w http.ResponseWriter, r *http.Request, f *os.File, size int64) {
		Serve(w, r, f, size, testHash, testModTime)
	})
}

// BenchmarkServeContentBaseline1MiB is BenchmarkServe1MiB with plain
// http.ServeContent, to show what the contract fixes cost.
func BenchmarkServeContentBaseline1MiB(b *testing.B) {
	benchmarkServe(b, func(w http.ResponseWriter, r *http.Request, f *os.File, _ int64) {
		http.ServeContent(w, r, "", testModTime, f)
	})
}

// benchmarkServe fetches a 1 MiB file over loopback HTTP with respond as the
// handler's last step, opening the file per request as a real handler does.
func benchmarkServe(b *testing.B, respond func(w http.ResponseWriter, r *http.Request, f *os.File, size int64)) {
	const size = 1 << 20
	path := filepath.Join(b.TempDir(), "blob")
	if err := os.WriteFile(path, makeBlob(size), 0o600); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := os.Open(path)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer f.Close()
		respond(w, r, f, size)
	}))
	defer srv.Close()
	client := srv.Client()

	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Get(srv.URL)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || n != size || resp.StatusCode != http.StatusOK {
			b.Fatalf("got %d bytes, status %d, err %v", n, resp.StatusCode, err)
		}
	}
}

// FuzzConditionalHeaders sends arbitrary If-None-Match, If-Modified-Since,
// If-Range, Range, If-Match and If-Unmodified-Since values through Serve:
// every answer is 200, 206 or 304 with ETag and Last-Modified; a 304 has no
// body, a 200 has the whole blob, and a 206 never comes from a Range that
// ParseRange refuses or under an If-Range that is not the blob's own tag. An
// If-None-Match naming the blob's own tag always answers 304.
func FuzzConditionalHeaders(f *testing.F) {
	tag := `"` + testHash + `"`
	f.Add(tag, "", "", "", "", "")
	f.Add("W/"+tag, testLastModified, tag, "bytes=0-9", "", "")
	f.Add(`"other", `+tag, "", "", "", "", "")
	f.Add("*", "", "", "", "nope", "Mon, 01 Jan 1970 00:00:00 GMT")
	f.Add("", testLastModified, "", "", "", "")
	f.Add("", "Sun, 22 Nov 2026 09:59:59 GMT", "", "", "", "")
	f.Add("", "Sunday, 22-Nov-26 10:00:00 GMT", testLastModified, "bytes=-5", "", "")
	f.Add("", "", "W/"+tag, "bytes=1-2", "", "")
	f.Add("", "", "garbage", "bytes=1-2,4-5", "", "")
	f.Add(`"`, "\xff", "\x00", "bytes=\xff", "\xff", "\xff")
	f.Fuzz(func(t *testing.T, ifNoneMatch, ifModifiedSince, ifRange, rangeHeader, ifMatch, ifUnmodifiedSince string) {
		header := http.Header{}
		for name, v := range map[string]string{
			"If-None-Match": ifNoneMatch, "If-Modified-Since": ifModifiedSince, "If-Range": ifRange,
			"Range": rangeHeader, "If-Match": ifMatch, "If-Unmodified-Since": ifUnmodifiedSince,
		} {
			if v != "" {
				header[name] = []string{v}
			}
		}
		r := httptest.NewRequest(http.MethodGet, "/s/link/blob/"+testHash, nil)
		r.Header = header
		w := httptest.NewRecorder()
		Serve(w, r, bytes.NewReader(testBlob), int64(len(testBlob)), testHash, testModTime)
		resp := w.Result()
		body, _ := io.ReadAll(resp.Body)
		if got := resp.Header.Get("ETag"); got != tag {
			t.Fatalf("ETag %q", got)
		}
		if got := resp.Header.Get("Last-Modified"); got != testLastModified {
			t.Fatalf("Last-Modified %q", got)
		}
		switch resp.StatusCode {
		case http.StatusNotModified:
			if len(body) != 0 {
				t.Fatalf("304 with %d body bytes", len(body))
			}
		case http.StatusOK:
			if !bytes.Equal(body, testBlob) {
				t.Fatalf("200 with %d bytes that are not the blob", len(body))
			}
		case http.StatusPartialContent:
			if _, ok := ParseRange(rangeHeader, int64(len(testBlob))); !ok {
				t.Fatalf("206 for a Range ParseRange refuses: %q", rangeHeader)
			}
			if ifRange != "" && ifRange != tag {
				t.Fatalf("206 under If-Range %q", ifRange)
			}
		default:
			t.Fatalf("status %d for %q", resp.StatusCode, header)
		}
		if ifNoneMatch == tag && resp.StatusCode != http.StatusNotModified {
			t.Fatalf("If-None-Match with the blob's own tag answered %d", resp.StatusCode)
		}
	})
}

// TestServeDirectMatchesServeContent: the requests serveDirect answers itself
// get exactly the answer of the ServeContent path. A conditional that cannot
// match (If-None-Match of another tag) sends the same request down that path.
func TestServeDirectMatchesServeContent(t *testing.T) {
	ranges := []string{
		"", "bytes=0-9", "bytes=10-", "bytes=-5", "bytes=90-1000", "bytes=0-99", "BYTES=3-4",
		"bytes=0-99999999999999999999", " bytes=1-2", "bytes=200-300", "bytes=5-2", "pages=1-2",
		"bytes=-0", "bytes=" + strings.Repeat("0-0,", maxRanges+1) + "0-0",
	}
	for _, blob := range [][]byte{testBlob, {}} {
		for _, rng := range ranges {
			for _, method := range []string{http.MethodGet, http.MethodHead} {
				t.Run(fmt.Sprintf("%s/%d/%q", method, len(blob), rng), func(t *testing.T) {
					header := http.Header{}
					if rng != "" {
						header.Set("Range", rng)
					}
					direct := serve(t, method, header, blob)
					header.Set("If-None-Match", `"another-blob"`)
					viaServeContent := serve(t, method, header, blob)
					if direct.StatusCode != viaServeContent.StatusCode {
						t.Errorf("status %d, ServeContent's %d", direct.StatusCode, viaServeContent.StatusCode)
					}
					if !maps.EqualFunc(direct.Header, viaServeContent.Header, slices.Equal) {
						t.Errorf("header %v,\nServeContent's %v", direct.Header, viaServeContent.Header)
					}
					got, _ := io.ReadAll(direct.Body)
					want, _ := io.ReadAll(viaServeContent.Body)
					if !bytes.Equal(got, want) {
						t.Errorf("body %q, ServeContent's %q", got, want)
					}
				})
			}
		}
	}
}
