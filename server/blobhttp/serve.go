// Package blobhttp answers reads of immutable, content-addressed blobs: range
// requests, conditional requests and caching headers as the share-link contract
// (server/PROTOCOL.md §7) defines them, on top of net/http's ServeContent.
package blobhttp

import (
	"io"
	"net/http"
	"strconv"
	"time"
)

// maxRanges is the most ranges one request may ask for. A longer set is ignored
// and the whole blob sent, which RFC 9110 section 14.2 allows: it stops a
// header of many tiny ranges from turning one request into thousands of
// multipart parts and seeks. net/http alone only ignores a set whose lengths add
// up to more than the blob.
const maxRanges = 64

// RangeReader is implemented by content that fetches its bytes on demand
// (the S3 engine's blobs): ReadRange announces that the next n bytes from
// the current position are all that will be read before the next Seek or
// Close, so one request with exact bounds fetches them. Serve calls it
// before it copies a range; a local file does not implement it.
type RangeReader interface {
	ReadRange(n int64)
}

// Serve writes the blob read from content, which holds exactly size bytes, whose
// content address is hash (64 lowercase hex characters, so it needs no quoting
// in an entity tag) and which was stored at modTime.
//
// Every answer is 200, 206 or 304 and carries ETag: "<hash>" (strong),
// Last-Modified, Accept-Ranges: bytes and Cache-Control: private, no-cache.
// 200 and 206 bodies are application/octet-stream, never sniffed; a request for
// several ranges gets net/http's multipart/byteranges. If-None-Match and then
// If-Modified-Since may answer 304. Range is honoured only when it is
// well-formed, at least one of its ranges is satisfiable, and If-Range, when
// present, matches under strong comparison; otherwise the whole blob is sent with
// 200, never 416. If-Match and If-Unmodified-Since are ignored (see
// contractRequest).
//
// When content is an *os.File and w implements io.ReaderFrom, as net/http's own
// ResponseWriter does, the body goes out through w's ReadFrom, so the kernel can
// send the file (sendfile) without copying it through user space.
//
// Serve only writes the response. It does not check the method, the caller or the
// hash: the handler does that first.
func Serve(w http.ResponseWriter, r *http.Request, content io.ReadSeeker, size int64, hash string, modTime time.Time) {
	lastModified := modTime.UTC().Format(http.TimeFormat)
	h := w.Header()
	// Direct assignment of canonical keys: Set would canonicalize each.
	h["Etag"] = []string{`"` + hash + `"`}
	h["Last-Modified"] = []string{lastModified}
	h["Accept-Ranges"] = []string{"bytes"}
	h["Cache-Control"] = []string{"private, no-cache"}
	h["Content-Type"] = []string{"application/octet-stream"}
	if serveDirect(w, r, content, size) {
		return
	}
	w = &lastModifiedWriter{ResponseWriter: w, lastModified: lastModified}
	http.ServeContent(w, contractRequest(r, size, `"`+hash+`"`), "", modTime, content)
}

// serveDirect answers the common requests itself, with the headers Serve has
// set: a read of the whole blob or of one range, with no conditional that
// could make the answer 304 or turn the range off (If-None-Match,
// If-Modified-Since, If-Range). It gives exactly ServeContent's answer to
// them (contractRequest's rules included: a Range that is to be ignored
// gets the whole blob) without the copy of the request and its header that
// rewriting the Range costs, and without ServeContent's seeks to learn a
// size the caller already gave. It reports false, having written nothing,
// for any other request.
func serveDirect(w http.ResponseWriter, r *http.Request, content io.ReadSeeker, size int64) bool {
	if r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Modified-Since") != "" || r.Header.Get("If-Range") != "" {
		return false
	}
	code, start, n := http.StatusOK, int64(0), size
	if rangeHeader := r.Header.Get("Range"); rangeHeader != "" {
		ranges, ok := ParseRange(rangeHeader, size)
		switch {
		case ok && len(ranges) == 1:
			ra := ranges[0]
			code, start, n = http.StatusPartialContent, ra.Start, ra.End-ra.Start+1
		case ok && len(ranges) <= maxRanges:
			return false // several ranges: ServeContent's multipart/byteranges
		}
	}
	if start != 0 {
		if _, err := content.Seek(start, io.SeekStart); err != nil {
			return false
		}
	}
	if code == http.StatusPartialContent {
		w.Header()["Content-Range"] = []string{"bytes " + strconv.FormatInt(start, 10) + "-" +
			strconv.FormatInt(start+n-1, 10) + "/" + strconv.FormatInt(size, 10)}
	}
	w.Header()["Content-Length"] = []string{strconv.FormatInt(n, 10)}
	w.WriteHeader(code)
	if r.Method != http.MethodHead && n > 0 {
		if rr, ok := content.(RangeReader); ok {
			rr.ReadRange(n)
		}
		// CopyN reaches w's ReadFrom: sendfile for a file, ranges included.
		// The header is not flushed here: with its type and length set, the
		// server's writer sends it in the same send as the body's first
		// bytes (net/http's own ReadFrom would copy 512 bytes through user
		// space first, to sniff a type that is already set).
		io.CopyN(w, content, n)
	}
	return true
}

// contractRequest returns r, or a copy of r with its own header, such that every
// answer ServeContent can give to it is one the contract allows.
//
// Range: ServeContent answers 416 to a malformed or unsatisfiable Range, and
// rejects some headers RFC 9110 accepts (a case-insensitive unit, positions past
// int64); it also answers 206 with "bytes 0--1/0" to a suffix range of an empty
// blob. So the header is parsed here: if it is to be ignored it is removed, and
// otherwise it is replaced by the canonical form of its satisfiable ranges, which
// ServeContent reads exactly as ParseRange did.
//
// If-Range: the interface honours Range only when If-Range, if sent, is the
// blob's entity tag under strong comparison, so a Range under any other
// If-Range value is removed here. ServeContent alone would also honour an
// HTTP-date equal to Last-Modified (RFC 9110 allows a date as the validator),
// a 206 the contract does not give. A strong match is left for ServeContent,
// which agrees with it.
//
// If-Match and If-Unmodified-Since are removed. They would make ServeContent
// answer 412 with an empty body, a status the interface does not list for blob
// reads and an error body outside the problem+json model; and a content-addressed
// blob never changes, so for a GET they carry nothing that If-None-Match and the
// hash in the path do not already say.
func contractRequest(r *http.Request, size int64, etag string) *http.Request {
	rangeHeader := r.Header.Get("Range")
	if rangeHeader == "" && r.Header.Get("If-Match") == "" && r.Header.Get("If-Unmodified-Since") == "" {
		return r
	}
	r = r.WithContext(r.Context())
	r.Header = r.Header.Clone()
	r.Header.Del("If-Match")
	r.Header.Del("If-Unmodified-Since")
	if rangeHeader != "" {
		ifRange := r.Header.Get("If-Range")
		if ranges, ok := ParseRange(rangeHeader, size); ok && len(ranges) <= maxRanges && (ifRange == "" || ifRange == etag) {
			r.Header.Set("Range", formatRange(ranges))
		} else {
			r.Header.Del("Range")
		}
	}
	return r
}

// lastModifiedWriter puts Last-Modified back on a 304: ServeContent deletes it
// there whenever an ETag is set, and the contract wants both on every 304.
//
// Re-adding the header when the status is written keeps net/http the only
// evaluator of If-None-Match and If-Modified-Since (their precedence, entity-tag
// lists, weak comparison, date truncation), where deciding the 304 here would
// copy that logic. The cost is that a wrapper hides the underlying writer's
// optional interfaces, so it re-exposes the ones that matter: ReadFrom (sendfile)
// and Unwrap (http.ResponseController).
type lastModifiedWriter struct {
	http.ResponseWriter
	lastModified string
}

func (w *lastModifiedWriter) WriteHeader(code int) {
	if code == http.StatusNotModified {
		w.Header().Set("Last-Modified", w.lastModified)
	}
	w.ResponseWriter.WriteHeader(code)
}

// ReadFrom hands the body to the underlying writer's ReadFrom when it has one.
// ServeContent copies the body with io.CopyN, which uses the destination's
// io.ReaderFrom; net/http's ReadFrom passes an *os.File (behind an
// io.LimitedReader) to the TCP connection, which sends it with sendfile.
func (w *lastModifiedWriter) ReadFrom(src io.Reader) (int64, error) {
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(src)
	}
	return io.Copy(w.ResponseWriter, src)
}

// Unwrap lets http.ResponseController reach the underlying writer (Flush,
// deadlines). ServeContent itself never flushes, so no Flush method is needed
// on the wrapper.
func (w *lastModifiedWriter) Unwrap() http.ResponseWriter {
	return w.ResponseWriter
}
