package cli

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// lockedBuffer is a bytes.Buffer the flusher and the test may share.
type lockedBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes++
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestLogBuffer: info lines wait (for the flusher, which this test never
// lets run), a warn line goes out at once after them in order, a full
// buffer goes out whatever the level, and Close writes the rest.
func TestLogBuffer(t *testing.T) {
	out := &lockedBuffer{}
	buf := newLogBuffer(out, time.Hour)
	log := zerolog.New(buf)
	log.Info().Msg("first")
	log.Debug().Msg("second")
	if got := out.String(); got != "" {
		t.Fatalf("info and debug lines were written at once: %q", got)
	}
	log.Warn().Msg("third")
	got := out.String()
	first, second, third := strings.Index(got, "first"), strings.Index(got, "second"), strings.Index(got, "third")
	if first < 0 || second < first || third < second || out.writes != 1 {
		t.Fatalf("after a warn line: %d writes of %q, want the three lines in order in one write", out.writes, got)
	}
	long := strings.Repeat("x", 1024)
	for range logBufferSize/len(long) + 1 {
		log.Info().Msg(long)
	}
	if out.writes != 2 || strings.Count(out.String(), long) < logBufferSize/len(long) {
		t.Fatalf("a full buffer was not written: %d writes", out.writes)
	}
	log.Info().Msg("last")
	if strings.Contains(out.String(), "last") {
		t.Fatal("the last info line was written before Close")
	}
	if err := buf.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(out.String(), "\"last\"}\n") {
		t.Fatalf("Close did not write the last line: %q", out.String()[max(0, out.buf.Len()-80):])
	}
}

// TestLogBufferFlushesOnItsOwn: a gathered info line is written by the
// flusher without any further line or Close.
func TestLogBufferFlushesOnItsOwn(t *testing.T) {
	out := &lockedBuffer{}
	buf := newLogBuffer(out, time.Millisecond)
	defer buf.Close()
	log := zerolog.New(buf)
	log.Info().Msg("alone")
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "alone") {
		if time.Now().After(deadline) {
			t.Fatal("the flusher never wrote the line")
		}
		time.Sleep(time.Millisecond)
	}
}
