package servertest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Client sends requests to one sealbox server and reads whole responses.
type Client struct {
	BaseURL string       // the server's URL, "http://127.0.0.1:port"
	HTTP    *http.Client // nil is http.DefaultClient
}

// Req describes one request.
type Req struct {
	Method      string
	Path        string
	Token       string
	Body        any // string and []byte are sent as is; anything else as JSON
	ContentType string
	Header      map[string]string
}

// Response is a fully read HTTP response.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do sends req and reads the whole response; it fails the test on a
// transport error, so it is for the test's own goroutine.
func (c Client) Do(tb testing.TB, req Req) *Response {
	tb.Helper()
	r, err := c.Send(req)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// Send sends req and reads the whole response. It is Do for a goroutine of
// the test, or for a server that may be gone: a transport error is returned.
func (c Client) Send(req Req) (*Response, error) {
	var body io.Reader
	contentType := req.ContentType
	switch b := req.Body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	case []byte:
		body = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(raw)
	}
	if body != nil && contentType == "" {
		contentType = "application/json"
	}
	hr, err := http.NewRequest(req.Method, c.BaseURL+req.Path, body)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		hr.Header.Set("Content-Type", contentType)
	}
	if req.Token != "" {
		hr.Header.Set("Authorization", "Bearer "+req.Token)
	}
	for k, v := range req.Header {
		hr.Header.Set(k, v)
	}
	return c.roundTrip(hr)
}

// roundTrip sends hr and reads the whole response.
func (c Client) roundTrip(hr *http.Request) (*Response, error) {
	client := c.HTTP
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: raw}, nil
}

// JSON decodes the body into a map.
func (r *Response) JSON(tb testing.TB) map[string]any {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		tb.Fatalf("body is not a JSON object: %v: %q", err, r.Body)
	}
	return m
}

// WantStatus fails unless the response has the status.
func (r *Response) WantStatus(tb testing.TB, want int) *Response {
	tb.Helper()
	if r.Status != want {
		tb.Fatalf("status: got %d, want %d; body %s", r.Status, want, r.Body)
	}
	return r
}

// WantProblem fails unless the response is a problem+json body with the
// status and code, carrying every member server/PROTOCOL.md §1 requires.
func (r *Response) WantProblem(tb testing.TB, status int, code string) map[string]any {
	tb.Helper()
	r.WantStatus(tb, status)
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		tb.Fatalf("Content-Type: got %q, want application/problem+json", ct)
	}
	p := r.JSON(tb)
	if p["code"] != code {
		tb.Fatalf("code: got %v, want %s; body %s", p["code"], code, r.Body)
	}
	if p["status"] != float64(status) {
		tb.Fatalf("status member: got %v, want %d", p["status"], status)
	}
	if p["type"] != "https://sealbox.invalid/problems/"+code {
		tb.Fatalf("type: got %v", p["type"])
	}
	for _, k := range []string{"title", "detail"} {
		if s, _ := p[k].(string); s == "" {
			tb.Fatalf("problem member %s missing: %s", k, r.Body)
		}
	}
	if status == http.StatusUnauthorized && !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), `Bearer realm="sealbox"`) {
		tb.Fatalf("401 without WWW-Authenticate: %q", r.Header.Get("WWW-Authenticate"))
	}
	return p
}
