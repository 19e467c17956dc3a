package server

import (
	"errors"
	"math"
	"net/http"
	"strconv"

	"sealbox/blobs"
	"sealbox/kv"
)

// statusByCode is the one table that turns an error code into an HTTP
// status. A code not listed here is a programming error and answers 500.
var statusByCode = map[string]int{
	kv.ECodeMalformed:        http.StatusBadRequest,
	kv.ECodeInvalid:          http.StatusUnprocessableEntity,
	kv.ECodeTooLarge:         http.StatusRequestEntityTooLarge,
	kv.ECodeUnsupportedMedia: http.StatusUnsupportedMediaType,
	kv.ECodeNotFound:         http.StatusNotFound,
	kv.ECodeMethodNotAllowed: http.StatusMethodNotAllowed,
	kv.ECodeRateLimited:      http.StatusTooManyRequests,
	kv.ECodeInternal:         http.StatusInternalServerError,
	kv.ECodeNotReady:         http.StatusServiceUnavailable,

	kv.ECodeRegistrationClosed: http.StatusForbidden,
	kv.ECodeAccountExists:      http.StatusConflict,
	kv.ECodeAccountNotFound:    http.StatusNotFound,

	kv.ECodeInvalidCredentials: http.StatusUnauthorized,
	kv.ECodeUnauthenticated:    http.StatusUnauthorized,
	kv.ECodeSessionExpired:     http.StatusUnauthorized,
	kv.ECodeAccountLocked:      http.StatusLocked,
	kv.ECodeChallengeExpired:   http.StatusUnauthorized,
	kv.ECodeInvalidCode:        http.StatusUnauthorized,
	kv.ECodeCodeReplayed:       http.StatusUnauthorized,
	kv.ECodeReauthRequired:     http.StatusForbidden,
	kv.ECodeProofRequired:      http.StatusUnauthorized,
	kv.ECodeSessionNotFound:    http.StatusNotFound,

	kv.ECodeTOTPAlreadyActive:        http.StatusConflict,
	kv.ECodeTOTPNothingPending:       http.StatusConflict,
	kv.ECodeTOTPNotEnrolled:          http.StatusConflict,
	kv.ECodeAlbumForbidden:           http.StatusForbidden,
	kv.ECodeAlbumNotFound:            http.StatusNotFound,
	kv.ECodeUploadNotFound:           http.StatusNotFound,
	kv.ECodeBlobNotFound:             http.StatusNotFound,
	kv.ECodeHashMismatch:             http.StatusUnprocessableEntity,
	kv.ECodeQuotaExceeded:            http.StatusForbidden,
	kv.ECodeEscrowNotFound:           http.StatusNotFound,
	kv.ECodeDirectoryMalformed:       http.StatusBadRequest,
	kv.ECodeDirectoryNotFound:        http.StatusNotFound,
	kv.ECodeDirectoryVersionConflict: http.StatusConflict,
	kv.ECodeIdentityKeyMismatch:      http.StatusForbidden,

	kv.ECodeEnrollmentCodeRefused: http.StatusNotFound,
	kv.ECodeRelayChannelNotFound:  http.StatusNotFound,
	kv.ECodeRelayMailboxFull:      http.StatusUnprocessableEntity,

	kv.ECodeShareNotFound:     http.StatusNotFound,
	kv.ECodeShareIDTaken:      http.StatusUnprocessableEntity,
	kv.ECodeShareBlobNotOwned: http.StatusUnprocessableEntity,

	kv.ECodeProtocolUnsupported: http.StatusUpgradeRequired,
	kv.ECodeOpProtocolMismatch:  http.StatusConflict,
	kv.ECodeOpStaleChain:        http.StatusConflict,
	kv.ECodeOpForeignAuthor:     http.StatusForbidden,
	kv.ECodeOpMetadataMismatch:  http.StatusUnprocessableEntity,
	kv.ECodeOpBlobMissing:       http.StatusUnprocessableEntity,
	kv.ECodeUpgradeInFlight:     http.StatusConflict,
	kv.ECodeUpgradeBadTarget:    http.StatusBadRequest,
	kv.ECodeUpgradeNotQuiescent: http.StatusConflict,

	kv.ECodeTransferNotFound: http.StatusNotFound,
	kv.ECodeOffsetMismatch:   http.StatusConflict,
	kv.ECodeTransferLocked:   http.StatusLocked,
	kv.ECodeTusVersion:       http.StatusPreconditionFailed,
}

// statusError overrides the table's status for one use of a code, where the
// contract gives one code two statuses (a refused TOTP code is 401 before a
// session exists and 403 on a bearer endpoint).
type statusError struct {
	status int
	err    *kv.Error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

// withStatus answers err (when it is a *kv.Error) with status instead of the
// table's.
func withStatus(status int, err error) error {
	var ke *kv.Error
	if errors.As(err, &ke) {
		return &statusError{status: status, err: ke}
	}
	return err
}

// problemTypeBase prefixes the code to form a problem's `type` URI.
const problemTypeBase = "https://sealbox.invalid/problems/"

// writeError is the only place an error becomes a response: an RFC 9457
// problem+json body with a stable `code`, or an empty 413. Anything that is
// not a *kv.Error is an internal error: logged with its cause, answered as a
// bare 500 that reveals nothing.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var ke *kv.Error
	if !errors.As(err, &ke) {
		ke = mappedError(err)
	}
	if ke == nil {
		requestLogger(r, s.log).Error().Err(err).Msg("internal error")
		ke = kv.Errorf(kv.ECodeInternal, "internal error")
	}
	s.noteRefusal(r, ke.Code)
	status, ok := statusByCode[ke.Code]
	if !ok {
		requestLogger(r, s.log).Error().Str("code", ke.Code).Msg("error code missing from the status table")
		status = http.StatusInternalServerError
	}
	var se *statusError
	if errors.As(err, &se) {
		status = se.status
	}
	h := w.Header()
	if status == http.StatusRequestEntityTooLarge {
		h.Set("Connection", "close")
		h.Set("Content-Length", "0")
		w.WriteHeader(status)
		return
	}
	if status == http.StatusUnauthorized {
		challenge := `Bearer realm="sealbox"`
		if ke.Code == kv.ECodeUnauthenticated && bearerToken(r) != "" {
			challenge += `, error="invalid_token"`
		}
		h.Set("WWW-Authenticate", challenge)
	}
	if ke.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int(math.Ceil(ke.RetryAfter.Seconds()))))
	}
	body := map[string]any{
		"type":   problemTypeBase + ke.Code,
		"title":  http.StatusText(status),
		"status": status,
		"detail": ke.Message,
		"code":   ke.Code,
	}
	if ke.Field != "" {
		body["field"] = ke.Field
	}
	for k, v := range ke.Details {
		body[k] = v
	}
	b, _ := marshalJSON(body)
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

// mappedError translates the sentinel errors of packages that do not speak
// kv.Error. It returns nil for an unknown error (blobs.ErrCorrupt among them:
// a damaged file is the operator's problem, answered as an opaque 500).
func mappedError(err error) *kv.Error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe), errors.Is(err, blobs.ErrTooLarge):
		return kv.Errorf(kv.ECodeTooLarge, "request body too large")
	case errors.Is(err, blobs.ErrHashMismatch):
		return kv.FieldErrorf(kv.ECodeHashMismatch, "hash", "the body does not hash to the hash in the path; nothing was stored")
	case errors.Is(err, blobs.ErrInvalidHash):
		return kv.FieldErrorf(kv.ECodeMalformed, "hash", "a hash must be 64 lowercase hex characters")
	case errors.Is(err, blobs.ErrNotFound):
		return kv.Errorf(kv.ECodeBlobNotFound, "blob not found")
	}
	return nil
}
