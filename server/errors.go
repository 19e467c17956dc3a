package server

import (
	"errors"
	"math"
	"net/http"
	"strconv"

	"sealbox/blobs"
	"sealbox/kv"
	"sealbox/kv/fault"
)

// statusByCode is the one table that turns an error code into an HTTP
// status. A code not listed here is a programming error and answers 500.
var statusByCode = map[string]int{
	fault.ECodeMalformed:        http.StatusBadRequest,
	fault.ECodeInvalid:          http.StatusUnprocessableEntity,
	fault.ECodeTooLarge:         http.StatusRequestEntityTooLarge,
	fault.ECodeUnsupportedMedia: http.StatusUnsupportedMediaType,
	fault.ECodeNotFound:         http.StatusNotFound,
	fault.ECodeMethodNotAllowed: http.StatusMethodNotAllowed,
	fault.ECodeRateLimited:      http.StatusTooManyRequests,
	fault.ECodeInternal:         http.StatusInternalServerError,
	fault.ECodeNotReady:         http.StatusServiceUnavailable,
	fault.ECodeHashQueueFull:    http.StatusServiceUnavailable,

	fault.ECodeRegistrationClosed: http.StatusForbidden,
	fault.ECodeInviteRequired:     http.StatusForbidden,
	fault.ECodeInviteNotFound:     http.StatusNotFound,
	fault.ECodeAssetDeleted:       http.StatusConflict,
	fault.ECodeAssetNotInTrash:    http.StatusNotFound,
	fault.ECodeAlbumDeleted:       http.StatusConflict,
	fault.ECodeAlbumNotInTrash:    http.StatusNotFound,
	fault.ECodeAccountExists:      http.StatusConflict,
	fault.ECodeAccountNotFound:    http.StatusNotFound,

	fault.ECodeInvalidCredentials: http.StatusUnauthorized,
	fault.ECodeUnauthenticated:    http.StatusUnauthorized,
	fault.ECodeSessionExpired:     http.StatusUnauthorized,
	fault.ECodeAccountLocked:      http.StatusLocked,
	fault.ECodeChallengeExpired:   http.StatusUnauthorized,
	fault.ECodeInvalidCode:        http.StatusUnauthorized,
	fault.ECodeCodeReplayed:       http.StatusUnauthorized,
	fault.ECodeReauthRequired:     http.StatusForbidden,
	fault.ECodeProofRequired:      http.StatusUnauthorized,
	fault.ECodeSessionNotFound:    http.StatusNotFound,

	fault.ECodeTOTPAlreadyActive:        http.StatusConflict,
	fault.ECodeTOTPNothingPending:       http.StatusConflict,
	fault.ECodeTOTPNotEnrolled:          http.StatusConflict,
	fault.ECodeAlbumForbidden:           http.StatusForbidden,
	fault.ECodeAlbumNotFound:            http.StatusNotFound,
	fault.ECodeUploadNotFound:           http.StatusNotFound,
	fault.ECodeBlobNotFound:             http.StatusNotFound,
	fault.ECodeHashMismatch:             http.StatusUnprocessableEntity,
	fault.ECodeQuotaExceeded:            http.StatusForbidden,
	fault.ECodeEscrowNotFound:           http.StatusNotFound,
	fault.ECodeDirectoryMalformed:       http.StatusBadRequest,
	fault.ECodeDirectoryNotFound:        http.StatusNotFound,
	fault.ECodeDirectoryVersionConflict: http.StatusConflict,
	fault.ECodeIdentityKeyMismatch:      http.StatusForbidden,

	fault.ECodeEnrollmentCodeRefused: http.StatusNotFound,
	fault.ECodeRelayChannelNotFound:  http.StatusNotFound,
	fault.ECodeRelayMailboxFull:      http.StatusUnprocessableEntity,

	fault.ECodeLimitRelayChannels:      http.StatusTooManyRequests,
	fault.ECodeLimitRelayBytes:         http.StatusTooManyRequests,
	fault.ECodeLimitDirectoryPublishes: http.StatusTooManyRequests,

	fault.ECodeShareNotFound:     http.StatusNotFound,
	fault.ECodeShareIDTaken:      http.StatusUnprocessableEntity,
	fault.ECodeShareBlobNotOwned: http.StatusUnprocessableEntity,
	fault.ECodeLimitShares:       http.StatusTooManyRequests,

	fault.ECodeProtocolUnsupported: http.StatusUpgradeRequired,
	fault.ECodeOpProtocolMismatch:  http.StatusConflict,
	fault.ECodeOpStaleChain:        http.StatusConflict,
	fault.ECodeOpForeignAuthor:     http.StatusForbidden,
	fault.ECodeOpMetadataMismatch:  http.StatusUnprocessableEntity,
	fault.ECodeOpBlobMissing:       http.StatusUnprocessableEntity,
	fault.ECodeUpgradeInFlight:     http.StatusConflict,
	fault.ECodeUpgradeBadTarget:    http.StatusBadRequest,
	fault.ECodeUpgradeNotQuiescent: http.StatusConflict,

	fault.ECodeTransferNotFound: http.StatusNotFound,
	fault.ECodeOffsetMismatch:   http.StatusConflict,
	fault.ECodeTransferLocked:   http.StatusLocked,
	fault.ECodeTusVersion:       http.StatusPreconditionFailed,

	fault.ECodeLimitUploadSessions: http.StatusTooManyRequests,
	fault.ECodeLimitTransfers:      http.StatusTooManyRequests,
	fault.ECodeLimitPendingBytes:   http.StatusTooManyRequests,
	fault.ECodeLimitUploadBuffer:   http.StatusTooManyRequests,
	fault.ECodeUploadBufferFull:    http.StatusServiceUnavailable,
}

// statusOnSession is the table's second column: the status of a code on a
// request that is signed in, where the contract gives the code another one.
// A refused second-factor code is 401 at verify-totp, where no session exists
// yet, and 403 on verify-enrollment and disable, where the session is fine
// and a client must never mistake a wrong code for a dead session.
var statusOnSession = map[string]int{
	fault.ECodeInvalidCode:  http.StatusForbidden,
	fault.ECodeCodeReplayed: http.StatusForbidden,
}

// problemTypeBase prefixes the code to form a problem's `type` URI.
const problemTypeBase = "https://sealbox.invalid/problems/"

// writeError is the only place an error becomes a response: an RFC 9457
// problem+json body with a stable `code`, or an empty 413. Anything that is
// not a *fault.Error is an internal error: logged with its cause, answered as a
// bare 500 that reveals nothing.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var ke *fault.Error
	var refusal *kv.Refusal
	switch {
	case errors.As(err, &refusal):
		ke = refusalProblem(refusal)
	case !errors.As(err, &ke):
		ke = mappedError(err)
	}
	if ke == nil {
		requestLogger(r, s.log).Error().Err(err).Msg("internal error")
		ke = fault.Errorf(fault.ECodeInternal, "internal error")
	}
	s.noteRefusal(r, ke.Code)
	if ke.Limit != "" {
		s.countLimitRefusal(ke.Limit)
	}
	status, ok := statusByCode[ke.Code]
	if !ok {
		requestLogger(r, s.log).Error().Str("code", ke.Code).Msg("error code missing from the status table")
		status = http.StatusInternalServerError
	}
	if onSession, ok := statusOnSession[ke.Code]; ok && signedIn(r) {
		status = onSession
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
		if ke.Code == fault.ECodeUnauthenticated && bearerToken(r) != "" {
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
	writeBody(w, status, "application/problem+json", "no-store", b)
}

// mappedError translates the sentinel errors of packages that do not speak
// fault.Error. It returns nil for an unknown error (blobs.ErrCorrupt among them:
// a damaged file is the operator's problem, answered as an opaque 500).
func mappedError(err error) *fault.Error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe), errors.Is(err, blobs.ErrTooLarge):
		return fault.Errorf(fault.ECodeTooLarge, "request body too large")
	case errors.Is(err, blobs.ErrHashMismatch):
		return fault.FieldErrorf(fault.ECodeHashMismatch, "hash", "the body does not hash to the hash in the path; nothing was stored")
	case errors.Is(err, blobs.ErrInvalidHash):
		return fault.FieldErrorf(fault.ECodeMalformed, "hash", "a hash must be 64 lowercase hex characters")
	case errors.Is(err, blobs.ErrNotFound):
		return fault.Errorf(fault.ECodeBlobNotFound, "blob not found")
	}
	return nil
}
