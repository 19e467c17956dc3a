package client

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"sealbox/kv/fault"
)

// Upload sessions and blobs (server/PROTOCOL.md §8) and tus transfers
// (§15). A blob is content-addressed and never rewritten, so every write
// here may be sent again.

// OpenUpload opens an upload session on albumID.
func (c *Client) OpenUpload(ctx context.Context, albumID string) (uploadID string, err error) {
	var a struct {
		UploadID string `json:"upload_id"`
	}
	// Retried: a try whose answer was lost leaves an unused session,
	// which expires within the hour.
	_, err = c.doJSON(ctx, request{method: http.MethodPost, path: "/v1/albums/" + url.PathEscape(albumID) + "/uploads", bearer: true, retryable: true}, &a)
	return a.UploadID, err
}

// CloseUpload closes an upload session; the blobs it stored stay held.
func (c *Client) CloseUpload(ctx context.Context, uploadID string) error {
	_, err := c.doJSON(ctx, request{method: http.MethodDelete, path: "/v1/uploads/" + url.PathEscape(uploadID), bearer: true, retryable: true}, nil)
	return err
}

// Content opens a blob's sealed bytes afresh for each try of its upload:
// a file reopened, or a reader over bytes in memory. A reader that is an
// io.Closer is closed once sent.
type Content func() (io.Reader, error)

// PutBlob stores the blob of hash (the SHA-256 of content's bytes, lowercase
// hex) in the upload session. It reports whether the account did not hold
// it before (the server's 201).
func (c *Client) PutBlob(ctx context.Context, uploadID, hash string, size int64, content Content) (created bool, err error) {
	status, err := c.doJSON(ctx, request{
		method: http.MethodPut, path: "/v1/uploads/" + url.PathEscape(uploadID) + "/blobs/" + hash,
		contentType: "application/octet-stream", body: c.sized(ctx, size, content), bearer: true, retryable: true,
	}, nil)
	return status == http.StatusCreated, err
}

// sized makes the body of each try with its length known, so it is sent
// with a Content-Length and the server refuses a blob over its limits
// before a byte arrives, paced by the client's upload rate.
func (c *Client) sized(ctx context.Context, size int64, content Content) func() (io.Reader, error) {
	return func() (io.Reader, error) {
		r, err := content()
		if err != nil {
			return nil, err
		}
		return &lengthReader{Reader: c.paced(ctx, io.LimitReader(r, size)), n: size, src: r}, nil
	}
}

// paced is r read at the client's upload rate, when it has one.
func (c *Client) paced(ctx context.Context, r io.Reader) io.Reader {
	if c.rate == nil {
		return r
	}
	return &pacedReader{ctx: ctx, r: r, rate: c.rate}
}

// lengthReader is a body of a known length (send sends it as the
// Content-Length) over a source it closes when net/http is done with it.
type lengthReader struct {
	io.Reader
	n   int64
	src io.Reader
}

func (l *lengthReader) Len() int { return int(l.n) }

func (l *lengthReader) Close() error {
	if c, ok := l.src.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// ReadBlob opens a blob the account holds, from offset for length bytes
// (length < 0: to the end). The caller closes it. A blob the account does
// not hold is an *Error with fault.ECodeBlobNotFound.
func (c *Client) ReadBlob(ctx context.Context, hash string, offset, length int64) (io.ReadCloser, error) {
	return c.readRange(ctx, request{method: http.MethodGet, path: "/v1/blobs/" + hash, bearer: true, retryable: true}, offset, length)
}

// Holds reports whether the account holds the blob of hash.
func (c *Client) Holds(ctx context.Context, hash string) (bool, error) {
	resp, err := c.do(ctx, request{method: http.MethodHead, path: "/v1/blobs/" + hash, bearer: true, retryable: true})
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusNotFound {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	return true, nil
}

// readRange sends a GET of a blob with a Range for offset and length
// (none for the whole blob) and checks that the answer is that range.
func (c *Client) readRange(ctx context.Context, req request, offset, length int64) (io.ReadCloser, error) {
	whole := offset == 0 && length < 0
	if !whole {
		end := ""
		if length >= 0 {
			if length == 0 {
				return io.NopCloser(strings.NewReader("")), nil
			}
			end = strconv.FormatInt(offset+length-1, 10)
		}
		req.header = http.Header{"Range": {fmt.Sprintf("bytes=%d-%s", offset, end)}}
	}
	resp, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	if !whole && resp.StatusCode != http.StatusPartialContent {
		// A range past the end is answered whole (200), never 416.
		resp.Body.Close()
		return nil, fmt.Errorf("the server answered %d to a read of bytes %d on: the range is past the blob's end", resp.StatusCode, offset)
	}
	return resp.Body, nil
}

// tusHeader is what every tus request but OPTIONS carries.
func tusHeader() http.Header { return http.Header{"Tus-Resumable": {"1.0.0"}} }

// TusCreate starts a resumable transfer of a blob of size bytes and hash in
// the upload session and returns its location (a path on the server), to
// keep for a resume in a later run.
func (c *Client) TusCreate(ctx context.Context, uploadID, hash string, size int64) (location string, err error) {
	h := tusHeader()
	h.Set("Upload-Length", strconv.FormatInt(size, 10))
	h.Set("Upload-Metadata", "hash "+base64.StdEncoding.EncodeToString([]byte(hash)))
	resp, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/uploads/" + url.PathEscape(uploadID) + "/tus", header: h, bearer: true})
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	location = resp.Header.Get("Location")
	if !strings.HasPrefix(location, "/v1/uploads/") {
		return "", fmt.Errorf("the server's tus Location %q is not a transfer", location)
	}
	return location, nil
}

// TusOffset is how many bytes of the transfer at location the server has
// acknowledged. A transfer the server does not know (completed, discarded
// or expired) is an *Error with fault.ECodeTransferNotFound.
func (c *Client) TusOffset(ctx context.Context, location string) (int64, error) {
	resp, err := c.do(ctx, request{method: http.MethodHead, path: location, header: tusHeader(), bearer: true, retryable: true})
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusNotFound {
		// A HEAD answer has no body to name its code: the 404 of this
		// route is the transfer's (server/PROTOCOL.md §15).
		e.Code = fault.ECodeTransferNotFound
	}
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return strconv.ParseInt(resp.Header.Get("Upload-Offset"), 10, 64)
}

// TusUpload sends the transfer at location, of the blob hash, from the
// offset the server acknowledged to size, reading content from there
// (content opens the whole blob; what precedes the offset is skipped). On
// a failure that passes (no answer, a restart) it asks for the offset again
// and goes on. A transfer the server no longer knows is done when the
// account holds the blob (the answer to its last PATCH was lost), and
// otherwise an *Error with fault.ECodeTransferNotFound: the caller starts a
// new one.
func (c *Client) TusUpload(ctx context.Context, location, hash string, size int64, content Content) error {
	delay := c.Retry.Initial
	for attempt := 1; ; attempt++ {
		offset, err := c.TusOffset(ctx, location)
		if CodeOf(err) == fault.ECodeTransferNotFound {
			if held, herr := c.Holds(ctx, hash); herr != nil || held {
				return herr
			}
			return err
		}
		if err == nil {
			err = c.tusPatch(ctx, location, offset, size, content)
			if err == nil {
				return nil
			}
		}
		// A PATCH cut off (no answer) acknowledged what arrived, and one
		// that found another offset (an earlier try's bytes landed after
		// all) is behind the server: both go on from the server's offset.
		_, transient := retryAfter(err)
		if !transient && CodeOf(err) != fault.ECodeOffsetMismatch || attempt >= c.Retry.Attempts {
			return err
		}
		if serr := c.Sleep(ctx, delay); serr != nil {
			return err
		}
		delay = min(2*delay, c.Retry.Max)
	}
}

// tusPatch sends the bytes from offset to size in one PATCH.
func (c *Client) tusPatch(ctx context.Context, location string, offset, size int64, content Content) error {
	h := tusHeader()
	h.Set("Upload-Offset", strconv.FormatInt(offset, 10))
	body := func() (io.Reader, error) {
		r, err := content()
		if err != nil {
			return nil, err
		}
		if err := skip(r, offset); err != nil {
			if c, ok := r.(io.Closer); ok {
				c.Close()
			}
			return nil, err
		}
		return &lengthReader{Reader: c.paced(ctx, io.LimitReader(r, size-offset)), n: size - offset, src: r}, nil
	}
	// Not retried here: TusUpload goes on from the offset the server
	// acknowledged by then. An expired access token is refreshed by do.
	resp, err := c.do(ctx, request{method: http.MethodPatch, path: location, header: h, contentType: "application/offset+octet-stream", body: body, bearer: true})
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// skip discards the first n bytes of r, seeking when it can.
func skip(r io.Reader, n int64) error {
	if n == 0 {
		return nil
	}
	if s, ok := r.(io.Seeker); ok {
		_, err := s.Seek(n, io.SeekStart)
		return err
	}
	_, err := io.CopyN(io.Discard, r, n)
	return err
}

// TusCancel discards the transfer at location and the bytes it received.
func (c *Client) TusCancel(ctx context.Context, location string) error {
	_, err := c.doJSON(ctx, request{method: http.MethodDelete, path: location, header: tusHeader(), bearer: true, retryable: true}, nil)
	return err
}
