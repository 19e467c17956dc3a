package client

import (
	"context"
	"io"
	"sync"
	"time"
)

// rateLimit paces the bytes of every upload body of a client to a rate
// per second, shared by all its uploads at once. Each read reserves its
// bytes: sent tracks when every byte reserved so far will have gone at the
// rate, and a read waits until that is within one second of now (the
// burst), so uploads running at once share the rate, whatever their
// number.
type rateLimit struct {
	perSecond float64
	now       func() time.Time
	sleep     func(ctx context.Context, d time.Duration) error

	mu   sync.Mutex
	sent time.Time
}

// SetUploadRate paces every upload body to bytes per second across all of
// the client's uploads (0: no limit).
func (c *Client) SetUploadRate(bytesPerSecond int64) {
	if bytesPerSecond <= 0 {
		c.rate = nil
		return
	}
	c.rate = &rateLimit{perSecond: float64(bytesPerSecond), now: time.Now, sleep: func(ctx context.Context, d time.Duration) error { return c.Sleep(ctx, d) }}
}

// burst is how far ahead of the rate reads may run.
const burst = time.Second

// SetClock replaces the upload rate's clock (time.Now); call it after
// SetUploadRate. Tests stop the clock, so waits are counted, not slept.
func (c *Client) SetClock(now func() time.Time) {
	if c.rate != nil {
		c.rate.now = now
	}
}

// take waits until n more bytes may be sent.
func (r *rateLimit) take(ctx context.Context, n int) error {
	r.mu.Lock()
	now := r.now()
	if r.sent.Before(now) {
		r.sent = now
	}
	r.sent = r.sent.Add(time.Duration(float64(n) / r.perSecond * float64(time.Second)))
	wait := r.sent.Sub(now) - burst
	r.mu.Unlock()
	if wait <= 0 {
		return nil
	}
	return r.sleep(ctx, wait)
}

// pacedReader reads through the client's rate limit.
type pacedReader struct {
	ctx  context.Context
	r    io.Reader
	rate *rateLimit
}

// maxPacedRead keeps each wait short, so the pace is smooth.
const maxPacedRead = 32 << 10

func (p *pacedReader) Read(b []byte) (int, error) {
	if len(b) > maxPacedRead {
		b = b[:maxPacedRead]
	}
	n, err := p.r.Read(b)
	if n > 0 {
		if werr := p.rate.take(p.ctx, n); werr != nil {
			return n, werr
		}
	}
	return n, err
}
