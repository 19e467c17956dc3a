package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// marshalJSON is the one encoding of every JSON answer: without the HTML
// escaping of encoding/json, so a URI is served as
// "...?algorithm=SHA1&digits=6", not "\u0026digits". No answer is embedded in
// HTML, and every one carries its own Content-Type with nosniff.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// writeBody writes every answer that has a body, problems included:
// status, then b with its Content-Type, its Cache-Control and its exact
// Content-Length.
func writeBody(w http.ResponseWriter, status int, contentType, cacheControl string, b []byte) error {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", cacheControl)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, err := w.Write(b)
	return err
}

// writeJSON answers a JSON body. JSON answers are never cached.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := marshalJSON(v)
	if err != nil {
		return err
	}
	return writeBody(w, status, "application/json", "no-store", b)
}

// writeBytes answers opaque bytes exactly as stored (a link's wrapped
// secret, an escrow, a directory). They are key material of one account,
// so no cache may keep them.
func writeBytes(w http.ResponseWriter, contentType string, b []byte) error {
	return writeBody(w, http.StatusOK, contentType, "no-store", b)
}

// noContent answers 204.
func noContent(w http.ResponseWriter) error {
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// formatTime is the wire form of a timestamp: RFC 3339, UTC, whole seconds.
func formatTime(t time.Time) string {
	return t.UTC().Truncate(time.Second).Format(time.RFC3339)
}
