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

// stallWriter bounds how long a response can stall: every write, of at most
// writeChunk bytes, gets WriteStall to go out, and a client that reads
// nothing for that long loses its connection (HTTP/2: its stream), which
// frees the goroutine, the file and the socket it held. It keeps
// io.ReaderFrom (chunked, so an *os.File still goes out by sendfile), Flush
// and Unwrap of the writer it wraps.
type stallWriter struct {
	http.ResponseWriter
	rc    *http.ResponseController
	stall time.Duration
	s     *Server
}

// withWriteStall wraps w so that its writes are bounded by WriteStall.
// The deadline is cleared at the start, so what net/http writes while the
// handler works (a 100 Continue) is not cut off by a deadline an earlier
// request on a kept-alive connection left, however long ago; each
// WriteHeader, Write and Flush then sets it afresh, which also bounds the
// flush net/http does once the handler returns (a 204 after an upload of
// hours included).
func (s *Server) withWriteStall(w http.ResponseWriter) http.ResponseWriter {
	sw := &stallWriter{ResponseWriter: w, rc: http.NewResponseController(w), stall: s.cfg.WriteStall, s: s}
	_ = sw.rc.SetWriteDeadline(time.Time{}) // see arm
	return sw
}

// arm gives the next write WriteStall. An error means the writer cannot
// set deadlines (a test recorder): there is no connection to hold then.
func (sw *stallWriter) arm() { _ = sw.rc.SetWriteDeadline(time.Now().Add(sw.stall)) }

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
func (sw *stallWriter) ReadFrom(src io.Reader) (int64, error) {
	rf, ok := sw.ResponseWriter.(io.ReaderFrom)
	if !ok {
		return io.Copy(struct{ io.Writer }{sw}, src)
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
