package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"sealbox/kv"
)

// requestInfo travels in the request context. The route adapter fills in
// the matched route pattern, so logs name the pattern and never the raw
// path (a share id in a path is a capability).
type requestInfo struct {
	id    string
	route string
	// session is set by bearer once the request's token names a live
	// session (caller, statusOnSession); it travels here rather than in a
	// context of its own, which would copy the request once more.
	session *kv.Session
	// account is set by bearerAccount: the session's account, read with it.
	account *kv.Account
}

type ctxKey int

const ctxInfo ctxKey = 0

func infoFrom(r *http.Request) *requestInfo {
	if ri, ok := r.Context().Value(ctxInfo).(*requestInfo); ok {
		return ri
	}
	return &requestInfo{}
}

// requestLogger is the server logger with the request's id and route.
func requestLogger(r *http.Request, log zerolog.Logger) *zerolog.Logger {
	ri := infoFrom(r)
	l := log.With().Str("request_id", ri.id).Str("route", ri.route).Logger()
	return &l
}

func newRequestID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// recorder captures the status and byte count for the access log. It keeps
// io.ReaderFrom (so an *os.File body still goes out by sendfile), Flush and
// Unwrap of the writer it wraps.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (rec *recorder) WriteHeader(status int) {
	if rec.status == 0 {
		rec.status = status
	}
	rec.ResponseWriter.WriteHeader(status)
}

func (rec *recorder) Write(b []byte) (int, error) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	n, err := rec.ResponseWriter.Write(b)
	rec.bytes += int64(n)
	return n, err
}

// ReadFrom delegates to the wrapped writer's ReadFrom, which net/http
// implements with sendfile when src is a file.
func (rec *recorder) ReadFrom(src io.Reader) (int64, error) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	var n int64
	var err error
	if rf, ok := rec.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(src)
	} else {
		n, err = io.Copy(struct{ io.Writer }{rec.ResponseWriter}, src)
	}
	rec.bytes += n
	return n, err
}

func (rec *recorder) Flush() {
	if f, ok := rec.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (rec *recorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

// The security headers' values, shared by every response. net/http only
// reads a header's value slice, and nothing in sealbox appends to these.
var (
	nosniff    = []string{"nosniff"}
	frameDeny  = []string{"DENY"}
	cspNone    = []string{"default-src 'none'; frame-ancestors 'none'"}
	noReferrer = []string{"no-referrer"}
)

// withMiddleware wraps the handler of one listener ("main" or "share", the
// metrics' listener label): request id, security headers (the share reads'
// CORS headers among them), panic recovery and one access-log line per
// request. Every header it sets is in place before next runs, so answers
// written anywhere below (errors, a recovered panic, the blob fast path)
// carry them.
func (s *Server) withMiddleware(listener string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ri := &requestInfo{id: newRequestID(), route: "unmatched"}
		r = r.WithContext(context.WithValue(r.Context(), ctxInfo, ri))
		rec := &recorder{ResponseWriter: s.withWriteStall(w)}
		// Canonical keys assigned directly: Set would canonicalize each.
		h := rec.Header()
		h["X-Request-Id"] = []string{ri.id}
		h["X-Content-Type-Options"] = nosniff
		h["X-Frame-Options"] = frameDeny
		h["Content-Security-Policy"] = cspNone
		if strings.HasPrefix(r.URL.Path, "/s/") {
			// A share URL is a capability: never hand it on as a referrer,
			// whatever the answer, even for a path no route matches.
			h["Referrer-Policy"] = noReferrer
			setShareHeaders(h)
		}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				requestLogger(r, s.log).Error().Interface("panic", p).Bytes("stack", debug.Stack()).Msg("handler panicked")
				if rec.status == 0 {
					s.writeError(rec, r, errPanic)
				}
			}
			status := rec.status
			if status == 0 {
				status = http.StatusOK
			}
			elapsed := time.Since(start)
			method := methodName(r.Method)
			s.metrics.observe(listener, ri.route, method, status, elapsed)
			s.log.Info().
				Str("request_id", ri.id).
				Str("listener", listener).
				Str("method", method).
				Str("route", ri.route).
				Int("status", status).
				Int64("bytes", rec.bytes).
				Dur("duration_ms", elapsed).
				Msg("request")
		}()
		next.ServeHTTP(rec, r)
	})
}

// methodName is the request method as metrics and the access log name it:
// one of the standard methods, else "other". net/http accepts any token as a
// method, up to the header limit, and every distinct label value would be a
// metric series kept for the life of the process: unbounded memory for
// anyone who can reach the port.
func methodName(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}

// errPanic stands for a recovered panic; it is not a *fault.Error, so it is
// answered as an opaque 500.
var errPanic = panicError{}

type panicError struct{}

func (panicError) Error() string { return "handler panicked" }
