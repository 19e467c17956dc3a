package server

import (
	"io"
	"net/http"
	"time"
)

// writeChunk is the most a response write sends under one deadline: a
// client must take each chunk within WriteStall, so the slowest transfer
// that passes is writeChunk per WriteStall (about 1 KiB/s at the
// defaults), far below any live mobile link.
const writeChunk = 64 << 10

// stallSlack is the share of WriteStall by which a deadline is set beyond
// it (see arm): a write cut off made no progress for between WriteStall and
// WriteStall + WriteStall/stallSlack.
const stallSlack = 16

// stallWriter bounds how long a response can stall: every write, of at most
// writeChunk bytes, gets at least WriteStall to go out, and a client that
// reads nothing for a little longer (stallSlack) loses its connection
// (HTTP/2: its stream), which frees the goroutine, the file and the socket
// it held. It keeps io.ReaderFrom (chunked, so an *os.File still goes out
// by sendfile), Flush and Unwrap of the writer it wraps.
type stallWriter struct {
	http.ResponseWriter
	rc    *http.ResponseController
	stall time.Duration
	s     *Server
	// deadline is the write deadline last set; zero while none is.
	deadline time.Time
}

// withWriteStall wraps w so that its writes are bounded by WriteStall.
// The deadline is cleared at the start, so what net/http writes while the
// handler works (a 100 Continue) is not cut off by a deadline an earlier
// request on a kept-alive connection left, however long ago; each
// WriteHeader, Write and Flush then arms it, which also bounds the flush
// net/http does once the handler returns (a 204 after an upload of hours
// included).
func (s *Server) withWriteStall(w http.ResponseWriter) http.ResponseWriter {
	sw := &stallWriter{ResponseWriter: w, rc: http.NewResponseController(w), stall: s.cfg.WriteStall, s: s}
	_ = sw.rc.SetWriteDeadline(time.Time{}) // see arm
	return sw
}

// arm gives the next write at least WriteStall. It sets the deadline
// WriteStall plus a slack away, and leaves it when it is still WriteStall
// or more away: the header, the flush and the body of one response arm it
// once, not once each, and each SetWriteDeadline is a timer update in the
// runtime. An error means the writer cannot set deadlines (a test
// recorder): there is no connection to hold then.
func (sw *stallWriter) arm() {
	now := time.Now()
	if sw.deadline.Sub(now) >= sw.stall {
		return
	}
	sw.deadline = now.Add(sw.stall + sw.stall/stallSlack)
	_ = sw.rc.SetWriteDeadline(sw.deadline)
}

// stalled counts a write cut off by its deadline under write-stall.
func (sw *stallWriter) stalled(err error) error {
	if isTimeout(err) {
		sw.s.countLimitRefusal("write-stall")
	}
	return err
}

func (sw *stallWriter) WriteHeader(status int) {
	sw.arm()
	sw.ResponseWriter.WriteHeader(status)
}

func (sw *stallWriter) Write(b []byte) (int, error) {
	written := 0
	for len(b) > 0 {
		chunk := b[:min(len(b), writeChunk)]
		sw.arm()
		n, err := sw.ResponseWriter.Write(chunk)
		written += n
		if err != nil {
			return written, sw.stalled(err)
		}
		b = b[n:]
	}
	return written, nil
}

// ReadFrom sends src in chunks of writeChunk, each under its own deadline,
// through the wrapped writer's ReadFrom. net/http uses sendfile for an
// *os.File behind one *io.LimitedReader, never behind two: a src that is
// itself a LimitedReader (io.CopyN's, as blobhttp sends a range) is
// chunked over the reader it limits, and its N kept true.
//
// When the header has Content-Type and Content-Length, it goes out first
// (if it has not yet). Sending it first changes nothing on the wire, since
// neither a sniffed type nor the framing depends on the body then; it
// spares net/http's ReadFrom its copy of the first 512 bytes
// through user space, which it makes to sniff a type before the header is
// out.
func (sw *stallWriter) ReadFrom(src io.Reader) (int64, error) {
	rf, ok := sw.ResponseWriter.(io.ReaderFrom)
	if !ok {
		return io.Copy(struct{ io.Writer }{sw}, src)
	}
	if h := sw.Header(); h.Get("Content-Type") != "" && h.Get("Content-Length") != "" {
		sw.Flush()
	}
	limited, isLimited := src.(*io.LimitedReader)
	if isLimited {
		src = limited.R
	}
	var total int64
	for {
		chunk := int64(writeChunk)
		if isLimited {
			chunk = min(chunk, limited.N)
			if chunk <= 0 {
				return total, nil
			}
		}
		sw.arm()
		n, err := rf.ReadFrom(&io.LimitedReader{R: src, N: chunk})
		total += n
		if isLimited {
			limited.N -= n
		}
		if err != nil {
			return total, sw.stalled(err)
		}
		if n < chunk {
			return total, nil
		}
	}
}

func (sw *stallWriter) Flush() {
	sw.arm()
	_ = sw.rc.Flush()
}

func (sw *stallWriter) Unwrap() http.ResponseWriter { return sw.ResponseWriter }
