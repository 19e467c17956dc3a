package server

import (
	"sync"
	"time"

	"sealbox/blobs"
	"sealbox/kv/fault"
)

// uploadBuffers counts the memory that uploads in flight (blob PUTs, tus
// PATCHes) hold for their bodies on the way to storage: the inline head of
// a PUT, a PATCH's copy buffer and whatever the blob engine holds of one
// write (blobs.WriteBufferer). An upload reserves what it may hold before it
// reads a byte, and gives it back when it ends; beyond an account's share,
// or beyond the total, it is refused at once with Retry-After instead, so a
// client that opens hundreds of uploads and stalls them cannot make the
// server hold a buffer for each (server/PROTOCOL.md §8).
type uploadBuffers struct {
	perAccount, total int64

	mu        sync.Mutex
	used      int64
	byAccount map[string]int64
}

// uploadBufferRetry is the Retry-After of a refused upload: the uploads in
// flight end as fast as their bodies arrive, which the server cannot tell.
const uploadBufferRetry = 5 * time.Second

func newUploadBuffers(perAccount, total int64) *uploadBuffers {
	return &uploadBuffers{perAccount: perAccount, total: total, byAccount: map[string]int64{}}
}

// reserve reserves n bytes for an upload of accountID and returns the
// function that gives them back (once). An account with nothing reserved
// always gets its upload past its own share, and an upload always fits an
// idle server: a limit set below one upload's need slows uploads to one at
// a time, it never refuses them all.
func (b *uploadBuffers) reserve(accountID string, n int64) (release func(), err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	mine := b.byAccount[accountID]
	if mine > 0 && mine+n > b.perAccount {
		return nil, &fault.Error{Code: fault.ECodeLimitUploadBuffer, RetryAfter: uploadBufferRetry, Limit: "upload-buffer-account",
			Message: "this account's uploads in flight hold all the memory one account may use for them; retry when one has ended"}
	}
	if b.used > 0 && b.used+n > b.total {
		return nil, &fault.Error{Code: fault.ECodeUploadBufferFull, RetryAfter: uploadBufferRetry, Limit: "upload-buffer-total",
			Message: "the uploads in flight hold all the memory the server gives them; retry"}
	}
	b.used += n
	b.byAccount[accountID] = mine + n
	return sync.OnceFunc(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.used -= n
		if b.byAccount[accountID] -= n; b.byAccount[accountID] == 0 {
			delete(b.byAccount, accountID)
		}
	}), nil
}

// inFlight is the bytes reserved now.
func (b *uploadBuffers) inFlight() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// partialBuffer is what the blob engine holds in memory of a partial
// opened at offset while n more bytes are written to it.
func (s *Server) partialBuffer(offset, n int64) int64 {
	if wb, ok := s.blobs.(blobs.WriteBufferer); ok {
		return wb.WriteBuffer(offset, n)
	}
	return 0
}

// putBuffer is what a blob PUT of contentLength bytes (-1: unknown) may
// hold: its inline head (see content.Put), and, when the body may be larger
// than that, what the engine's Put of it holds, which a known length bounds
// (putLimit): a 64 KiB PUT holds 64 KiB, not an S3 part of 8 MiB.
func (s *Server) putBuffer(contentLength int64) int64 {
	if s.cfg.InlineMax > 0 && contentLength >= 0 && contentLength <= s.cfg.InlineMax {
		return contentLength
	}
	head := int64(0)
	if s.cfg.InlineMax > 0 {
		head = s.cfg.InlineMax + 1
	}
	if wb, ok := s.blobs.(blobs.WriteBufferer); ok {
		return head + wb.PutBuffer(s.putLimit(contentLength))
	}
	return head
}

// putLimit is the maxSize of the engine's Put of a PUT body of
// contentLength bytes (-1: unknown): the length when it is known (the body
// cannot pass it), so the engine holds no more than the body fills, else
// --max-blob.
func (s *Server) putLimit(contentLength int64) int64 {
	if contentLength >= 0 && contentLength < s.cfg.MaxBlob {
		return max(contentLength, 1) // 0 would be no bound
	}
	return s.cfg.MaxBlob
}
