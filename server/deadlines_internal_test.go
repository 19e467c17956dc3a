package server

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

// deadlineWriter is a ResponseWriter that records the write deadlines set
// on it (through http.ResponseController) and, at each write, how far
// away the deadline then was.
type deadlineWriter struct {
	*httptest.ResponseRecorder
	deadline time.Time
	sets     int
	// margins are the deadline's distance at each Write, ReadFrom and Flush.
	margins []time.Duration
	// events names Flush and ReadFrom calls in order.
	events []string
}

func (w *deadlineWriter) SetWriteDeadline(d time.Time) error {
	w.deadline = d
	w.sets++
	return nil
}

func (w *deadlineWriter) noteWrite(event string) {
	if !w.deadline.IsZero() {
		w.margins = append(w.margins, time.Until(w.deadline))
	}
	w.events = append(w.events, event)
}

func (w *deadlineWriter) Write(b []byte) (int, error) {
	w.noteWrite("write")
	return w.ResponseRecorder.Write(b)
}

func (w *deadlineWriter) ReadFrom(src io.Reader) (int64, error) {
	w.noteWrite("readfrom")
	return io.Copy(w.ResponseRecorder, src)
}

func (w *deadlineWriter) Flush() {
	w.noteWrite("flush")
	w.ResponseRecorder.Flush()
}

// TestStallWriterArmsOnce: a response of header and a body of several
// chunks, sent through ReadFrom as blobhttp sends a range, sets the write
// deadline twice (the clear at the start, then once), not once per
// header, flush and chunk; yet every write still has at least WriteStall,
// and at most WriteStall plus the slack, to go out. Once the deadline is
// nearer than WriteStall, the next write sets it afresh.
func TestStallWriterArmsOnce(t *testing.T) {
	const stall = time.Minute
	s := &Server{cfg: Config{Timeouts: Timeouts{WriteStall: stall}}}
	body := bytes.Repeat([]byte("sealed "), 3*writeChunk/7+100) // four chunks
	fw := &deadlineWriter{ResponseRecorder: httptest.NewRecorder()}
	w := s.withWriteStall(fw)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", "1")
	w.WriteHeader(http.StatusPartialContent)
	if n, err := io.CopyN(w, bytes.NewReader(body), int64(len(body))); err != nil || n != int64(len(body)) {
		t.Fatalf("copied %d of %d bytes: %v", n, len(body), err)
	}
	if !bytes.Equal(fw.Body.Bytes(), body) {
		t.Fatal("the body was not written whole and in order")
	}
	if fw.sets != 2 {
		t.Errorf("the write deadline was set %d times for one response, want 2 (cleared, then armed once)", fw.sets)
	}
	if len(fw.margins) != 5 { // the flush and four chunks
		t.Fatalf("%d writes seen (%v), want 5", len(fw.margins), fw.events)
	}
	for i, m := range fw.margins {
		if m < stall-time.Second || m > stall+stall/stallSlack {
			t.Errorf("write %d had %v to go out, want between WriteStall (%v) and WriteStall plus its slack", i, m, stall)
		}
	}

	// Time passes: the deadline is nearer than WriteStall now.
	sw := w.(*stallWriter)
	sw.deadline = sw.deadline.Add(-stall / 8)
	if _, err := w.Write([]byte("more")); err != nil {
		t.Fatal(err)
	}
	if fw.sets != 3 || time.Until(fw.deadline) < stall-time.Second {
		t.Errorf("after the deadline came nearer than WriteStall: %d sets, deadline in %v; want it set again to at least %v", fw.sets, time.Until(fw.deadline), stall)
	}
}

// TestStallWriterSendsHeaderFirst: ReadFrom flushes a header that has its
// type and length before the body, so net/http does not copy the body's
// first bytes through user space to sniff it, and leaves any other header
// to net/http, whose sniffing and framing depend on the body.
func TestStallWriterSendsHeaderFirst(t *testing.T) {
	s := &Server{cfg: Config{Timeouts: Timeouts{WriteStall: time.Minute}}}
	for _, tc := range []struct {
		name   string
		header map[string]string
		want   []string
	}{
		{"type and length", map[string]string{"Content-Type": "application/octet-stream", "Content-Length": "3"}, []string{"flush", "readfrom"}},
		{"no length", map[string]string{"Content-Type": "application/octet-stream"}, []string{"readfrom"}},
		{"no type", map[string]string{"Content-Length": "3"}, []string{"readfrom"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fw := &deadlineWriter{ResponseRecorder: httptest.NewRecorder()}
			w := s.withWriteStall(fw)
			for k, v := range tc.header {
				w.Header().Set(k, v)
			}
			if _, err := io.CopyN(w, bytes.NewReader([]byte("abc")), 3); err != nil {
				t.Fatal(err)
			}
			if got := fw.events; !slices.Equal(got, tc.want) {
				t.Errorf("calls %v, want %v", got, tc.want)
			}
		})
	}
}
