package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"sealbox/kv/fault"
)

// Error is a refusal by the server: its status and, for a problem+json
// answer, the stable code from sealbox's catalog (kv/fault), the field it
// names and the detail in words. A 413 has no body: its Code is
// fault.ECodeTooLarge all the same.
type Error struct {
	Status     int
	Code       string
	Field      string
	Detail     string
	RetryAfter time.Duration
	// Problem is every member of the problem body, the extensions (such
	// as a protocol range) included.
	Problem map[string]any
}

// Error says what the server refused in words, the status last.
func (e *Error) Error() string {
	detail := e.Detail
	if detail == "" {
		detail = http.StatusText(e.Status)
	}
	if e.Field != "" {
		return fmt.Sprintf("the server refused: %s (field %s, HTTP %d)", detail, e.Field, e.Status)
	}
	return fmt.Sprintf("the server refused: %s (HTTP %d)", detail, e.Status)
}

// Is matches an *Error with the same Code, so errors.Is(err,
// &client.Error{Code: fault.ECodeQuotaExceeded}) asks what was refused.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code != "" && t.Code == e.Code
}

// CodeOf is err's server error code, or "" when err is no refusal by the
// server.
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// NetError is a request that got no answer: the server is down, restarting
// or out of reach. It is retried.
type NetError struct{ Err error }

func (e *NetError) Error() string {
	return fmt.Sprintf("the server did not answer: %v", e.Err)
}

func (e *NetError) Unwrap() error { return e.Err }

// maxProblem bounds the problem body read: the server's are under 1 KiB.
const maxProblem = 64 << 10

// readError turns an answer of status 400 or more into an *Error.
func readError(resp *http.Response) error {
	e := &Error{Status: resp.StatusCode}
	if s := resp.Header.Get("Retry-After"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			e.RetryAfter = time.Duration(n) * time.Second
		}
	}
	if resp.StatusCode == http.StatusRequestEntityTooLarge {
		e.Code, e.Detail = fault.ECodeTooLarge, "the request is larger than the server accepts"
		return e
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxProblem))
	var p map[string]any
	if json.Unmarshal(body, &p) == nil {
		e.Problem = p
		e.Code, _ = p["code"].(string)
		e.Field, _ = p["field"].(string)
		e.Detail, _ = p["detail"].(string)
	}
	return e
}

// retryAfter reports whether err is a passing failure worth another try,
// and how long the server asked to wait first (0: the caller's backoff).
func retryAfter(err error) (time.Duration, bool) {
	var ne *NetError
	if errors.As(err, &ne) {
		return 0, true
	}
	var e *Error
	if !errors.As(err, &e) {
		return 0, false
	}
	switch e.Status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return e.RetryAfter, true
	case http.StatusLocked:
		// A tus transfer another writer holds is retried; a locked
		// account is not (its wait is the lockout's).
		return e.RetryAfter, e.Code == fault.ECodeTransferLocked
	}
	return 0, false
}
