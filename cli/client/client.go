// Package client is sealbox's Go client of its own HTTP API
// (server/PROTOCOL.md): one request helper, typed errors carrying the
// server's stable error codes, bearer tokens refreshed once when they
// expire, and retries with backoff of the requests that may be sent again.
// It moves bytes the caller sealed; it never sees a key or a plaintext.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"sealbox/kv/fault"
)

// Tokens are an account session's bearer secrets as the server answered
// them. ExpiresBy is the access token's expiry.
type Tokens struct {
	Access    string    `json:"access_token"`
	Refresh   string    `json:"refresh_token"`
	ExpiresBy time.Time `json:"-"`
}

// Retry is how a request that failed for a passing reason (no connection,
// 429, 502, 503, 504, a tus transfer another writer holds) is tried again:
// after Initial, doubling up to Max, or after the server's Retry-After when
// it says one, at most Attempts times in all. A request is retried only
// when sending it twice is safe: every read, and every write sealbox makes
// idempotent (a content-addressed blob, a lifecycle op, which the server
// answers as a replay).
type Retry struct {
	Attempts int
	Initial  time.Duration
	Max      time.Duration
}

// DefaultRetry rides out a server restart of about a minute.
var DefaultRetry = Retry{Attempts: 8, Initial: 500 * time.Millisecond, Max: 15 * time.Second}

// Client talks to one sealbox server. It is safe for concurrent use: a
// token that expires under several requests at once is refreshed once.
type Client struct {
	base *url.URL
	http *http.Client
	// UserAgent is sent with every request; the server shows it in the
	// account's session list.
	UserAgent string
	Retry     Retry
	// OnTokens, when set, is called with every new token pair (sign-in,
	// refresh), under the client's lock: the caller persists them there.
	OnTokens func(Tokens)
	// Sleep waits between tries; tests replace it so no test waits.
	Sleep func(ctx context.Context, d time.Duration) error

	mu     sync.Mutex
	tokens Tokens
	// rate paces upload bodies (SetUploadRate); nil: no limit.
	rate *rateLimit
}

// New returns a client of the server at base (scheme://host[:port], with
// an optional path prefix for a server behind a proxy). httpClient nil is
// http.DefaultClient.
func New(base string, httpClient *http.Client) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not a server address: give it as https://HOST[:PORT]", base)
	}
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	return &Client{base: u, http: httpClient, UserAgent: "sealbox-client", Retry: DefaultRetry, Sleep: sleep}, nil
}

// BaseURL is the server's address as given to New, without a trailing slash.
func (c *Client) BaseURL() string { return c.base.String() }

// SetTokens makes the client act for the session whose tokens these are.
func (c *Client) SetTokens(t Tokens) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tokens = t
}

// Tokens are the session's current tokens.
func (c *Client) Tokens() Tokens {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tokens
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// request is one API call. body makes the request's body afresh for each
// try (nil: none); a request whose body cannot be made twice has
// retryable false.
type request struct {
	method      string
	path        string
	query       url.Values
	header      http.Header
	contentType string
	body        func() (io.Reader, error)
	// bearer sends the session's access token and refreshes it once when
	// the server says it expired.
	bearer bool
	// retryable: sending the request twice does what sending it once does.
	retryable bool
}

// jsonBody is a body of v encoded as JSON, the same bytes for every try.
func jsonBody(v any) (func() (io.Reader, error), error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return func() (io.Reader, error) { return bytes.NewReader(b), nil }, nil
}

// do sends req, trying again as c.Retry allows, and returns the response of
// a 2xx or 3xx status with its body unread; any other status is an *Error
// (its body read and closed). The caller closes a returned body.
func (c *Client) do(ctx context.Context, req request) (*http.Response, error) {
	refreshed := false
	delay := c.Retry.Initial
	for attempt := 1; ; attempt++ {
		access := ""
		if req.bearer {
			access = c.Tokens().Access
		}
		resp, err := c.send(ctx, req, access)
		var apiErr *Error
		switch {
		case err == nil:
			return resp, nil
		case errors.As(err, &apiErr) && req.bearer && !refreshed && apiErr.Code == fault.ECodeUnauthenticated && c.Tokens().Refresh != "":
			// The access token expired (or was revoked): one refresh, then
			// the same request again. A session that was revoked fails
			// the refresh too, and that is the answer.
			refreshed = true
			if rerr := c.refreshAfter(ctx, access); rerr != nil {
				return nil, rerr
			}
			attempt--
			continue
		}
		wait, transient := retryAfter(err)
		if !transient || !req.retryable || attempt >= c.Retry.Attempts || ctx.Err() != nil {
			if transient && attempt > 1 {
				return nil, fmt.Errorf("gave up after %d tries: %w", attempt, err)
			}
			return nil, err
		}
		if wait == 0 {
			wait = delay
			delay = min(2*delay, c.Retry.Max)
		}
		if serr := c.Sleep(ctx, wait); serr != nil {
			return nil, err
		}
	}
}

// send makes one try of req.
func (c *Client) send(ctx context.Context, req request, access string) (*http.Response, error) {
	u := *c.base
	u.Path = c.base.Path + req.path
	u.RawQuery = req.query.Encode()
	var body io.Reader
	if req.body != nil {
		b, err := req.body()
		if err != nil {
			return nil, err
		}
		body = b
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, u.String(), body)
	if err != nil {
		return nil, err
	}
	if l, ok := body.(interface{ Len() int }); ok {
		// net/http learns the length of a few reader types only; a body
		// of known length is sent with it, so the server can refuse one
		// over its limits before reading it.
		hr.ContentLength = int64(l.Len())
		if hr.ContentLength == 0 {
			// net/http reads a body of length 0 as one of unknown length.
			if c, ok := body.(io.Closer); ok {
				c.Close()
			}
			hr.Body = http.NoBody
		}
	}
	for k, v := range req.header {
		hr.Header[k] = v
	}
	if req.contentType != "" {
		hr.Header.Set("Content-Type", req.contentType)
	}
	if access != "" {
		hr.Header.Set("Authorization", "Bearer "+access)
	}
	hr.Header.Set("User-Agent", c.UserAgent)
	resp, err := c.http.Do(hr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &NetError{Err: err}
	}
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		return nil, readError(resp)
	}
	return resp, nil
}

// doJSON sends req and decodes a JSON answer into out (nil: the body is
// discarded). It returns the answer's status.
func (c *Client) doJSON(ctx context.Context, req request, out any) (int, error) {
	resp, err := c.do(ctx, req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, err
	}
	if err := decodeAnswer(resp, out); err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}

// decodeAnswer decodes a JSON answer into out.
func decodeAnswer(resp *http.Response, out any) error {
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(out); err != nil {
		return fmt.Errorf("%s %s: the server's answer is not what sealbox answers: %w", resp.Request.Method, resp.Request.URL.Path, err)
	}
	return nil
}

// readAll reads a byte answer of at most limit bytes.
func readAll(resp *http.Response, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err == nil && int64(len(b)) > limit {
		err = fmt.Errorf("%s %s: the answer is over %d bytes, more than sealbox answers", resp.Request.Method, resp.Request.URL.Path, limit)
	}
	return b, err
}

// maxAnswer bounds a JSON answer the client reads into memory: the largest
// the server writes is a page of 5,000 feed entries, well under it.
const maxAnswer = 64 << 20

// Ready asks the server's readiness probe once (server/PROTOCOL.md §10):
// nil when it answers 200; a 503 error.not_ready names the failing check in
// its Problem's checks.
func (c *Client) Ready(ctx context.Context) error {
	_, err := c.doJSON(ctx, request{method: http.MethodGet, path: "/readyz"}, nil)
	return err
}
