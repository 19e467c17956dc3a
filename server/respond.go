package server

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// writeJSON answers a JSON body. JSON answers are never cached.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, err = w.Write(b)
	return err
}

// writeBytes answers opaque bytes exactly as stored. They are key material
// of one account, so no cache may keep them.
func writeBytes(w http.ResponseWriter, contentType string, b []byte) error {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(b)
	return err
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
