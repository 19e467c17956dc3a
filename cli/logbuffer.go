package cli

import (
	"io"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// logFlushEvery is the longest an info or debug line waits in a logBuffer
// before it is written.
const logFlushEvery = 100 * time.Millisecond

// logBufferSize is how many bytes of lines a logBuffer gathers before it
// writes them at once, whatever the time.
const logBufferSize = 32 << 10

// logBuffer gathers log lines and writes them a few times a second in one
// write, instead of one write(2) per line: serve logs a line per request,
// and that system call was a tenth of a small request's cost. A line at
// warn or above (or of no level) is written at once, after the lines
// gathered before it, so nothing that needs an operator waits and the
// order is kept. Every write
// is of whole lines (zerolog hands over one whole line per call), so
// nothing reading the log sees half a line. Close writes what is left.
type logBuffer struct {
	mu   sync.Mutex
	out  io.Writer
	buf  []byte
	stop chan struct{}
	done chan struct{}
}

// newLogBuffer starts the buffer's flusher, which writes what is gathered
// every interval (logFlushEvery in serve); Close stops it.
func newLogBuffer(out io.Writer, every time.Duration) *logBuffer {
	b := &logBuffer{out: out, buf: make([]byte, 0, logBufferSize), stop: make(chan struct{}), done: make(chan struct{})}
	go b.flushEvery(every)
	return b
}

func (b *logBuffer) Write(p []byte) (int, error) {
	return b.WriteLevel(zerolog.NoLevel, p)
}

// WriteLevel makes logBuffer a zerolog.LevelWriter, which hands each line
// over with its level.
func (b *logBuffer) WriteLevel(level zerolog.Level, p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if level >= zerolog.WarnLevel || len(b.buf) >= logBufferSize {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (b *logBuffer) flushLocked() error {
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.out.Write(b.buf)
	b.buf = b.buf[:0]
	return err
}

func (b *logBuffer) flushEvery(d time.Duration) {
	defer close(b.done)
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-tick.C:
			b.mu.Lock()
			b.flushLocked()
			b.mu.Unlock()
		}
	}
}

// Close stops the flusher and writes the lines still gathered.
func (b *logBuffer) Close() error {
	close(b.stop)
	<-b.done
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flushLocked()
}
