// Package fault is sealbox's one error model: the coded error type and the
// error.* catalog that clients switch on. It speaks no HTTP:
// server/errors.go alone turns a code into a status and a problem body.
//
// It is a leaf, imported by kv (the domain's refusals), by the server and
// its non-HTTP packages (server/signin, server/ratelimit), and by cli and
// cli/admin, whose admin socket carries a refusal's code to the operator's
// command. blobs does not import it: the server maps blobs' sentinel
// errors to codes.
//
// The catalog has two parts. This file holds the codes the domain may
// return: kv and the workflows beside the handlers. http.go holds the codes
// only the HTTP layer answers with: request syntax, media types, routing,
// readiness, the protocol's headers and request checks. kv never returns
// one of those and never names a request field (Error.Field), which kv's
// TestDomainSpeaksNoWire checks; the server names fields (kv.Refusal).
//
// The package sits under kv because kv is the domain layer that everything
// else sits on, so every importer is above it: the top level of the module
// is fixed (no new folder), and the only other homes, under server/ (which
// kv must never import) or blobs/, would point the dependency the wrong way.
// A client never sees the path; the codes are the contract.
package fault

import (
	"errors"
	"fmt"
	"time"
)

// Error is sealbox's one error type. Code is a stable `error.*` catalog code
// that clients switch on; the server maps each code to a status in exactly
// one table. Message is English detail safe to show to the caller: it
// never holds a secret.
type Error struct {
	Code    string
	Message string
	// Field names the request field at fault, when there is one. Only the
	// server sets it: the domain names rules, not fields (kv.Refusal).
	Field string
	// RetryAfter, when positive, tells the caller when to try again.
	RetryAfter time.Duration
	// Details are extra problem members (for example "submitted" and
	// "stored" on a directory conflict), keyed by their wire name.
	Details map[string]any
	// Limit, when set, names the configured limit that refused the request
	// (its serve flag without dashes, e.g. "share-rate"). The server counts
	// every such refusal in sealbox_limit_refusals_total{limit=Limit}.
	Limit string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Code + ": " + e.Message
}

// Errorf builds an *Error with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// FieldErrorf builds an *Error about one request field: the server's, never
// the domain's.
func FieldErrorf(code, field, format string, args ...any) *Error {
	return &Error{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// LimitErrorf builds the refusal of a configured limit: code is the catalog
// code the caller switches on, limit the flag that sets the limit (counted
// in metrics), retryAfter when waiting helps (zero otherwise).
func LimitErrorf(code, limit string, retryAfter time.Duration, format string, args ...any) *Error {
	return &Error{Code: code, Limit: limit, RetryAfter: retryAfter, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err when it is (or wraps) an *Error, else "".
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// The error catalog's domain part: the codes kv and the workflows beside
// the handlers return. Codes are part of the public contract: never rename
// one.
const (
	ECodeInvalid     = "error.request.invalid"
	ECodeRateLimited = "error.rate_limited"
	// ECodeHashQueueFull: a password check waited --hash-wait for one of
	// the hashing slots and none came free (503, Retry-After).
	ECodeHashQueueFull = "error.limit.hash_queue"

	ECodeAccountExists   = "error.account.exists"
	ECodeAccountNotFound = "error.account.not_found"
	// ECodeInviteRequired (403): in invite mode, a registration without a
	// live invitation for its email; missing, wrong, spent, expired and
	// bound to another email answer alike.
	ECodeInviteRequired = "error.registration.invite_required"
	// ECodeInviteNotFound: the operator named an invitation that is not
	// outstanding (spent, expired, revoked or never issued).
	ECodeInviteNotFound = "error.invite.not_found"
	// ECodeAssetDeleted (409): an op or a tombstone continues the chain of
	// an asset that is deleted (in the trash, or purged from it).
	ECodeAssetDeleted = "error.asset.deleted"
	// ECodeAssetNotInTrash (404): a restore names an asset that is not in
	// the trash (live, purged, unknown, or another account's album).
	ECodeAssetNotInTrash = "error.asset.not_in_trash"
	// ECodeAlbumDeleted (409): the album is deleted: nothing is added to
	// it until its owner restores it.
	ECodeAlbumDeleted = "error.album.deleted"
	// ECodeAlbumNotInTrash (404): a restore names an album that is not in
	// the trash (live, purged, unknown or another account's).
	ECodeAlbumNotInTrash = "error.album.not_in_trash"

	ECodeInvalidCredentials = "error.auth.invalid_credentials"
	ECodeUnauthenticated    = "error.auth.unauthenticated"
	ECodeSessionExpired     = "error.auth.session_expired"
	ECodeAccountLocked      = "error.auth.account_locked"
	ECodeChallengeExpired   = "error.auth.challenge_expired"
	ECodeInvalidCode        = "error.auth.invalid_code"
	ECodeCodeReplayed       = "error.auth.code_replayed"
	ECodeSessionNotFound    = "error.session.not_found"

	ECodeTOTPAlreadyActive        = "error.totp.already_active"
	ECodeTOTPNothingPending       = "error.totp.nothing_pending"
	ECodeTOTPNotEnrolled          = "error.totp.not_enrolled"
	ECodeAlbumForbidden           = "error.album.forbidden"
	ECodeAlbumNotFound            = "error.album.not_found"
	ECodeUploadNotFound           = "error.upload.not_found"
	ECodeBlobNotFound             = "error.blob.not_found"
	ECodeHashMismatch             = "error.blob.hash_mismatch"
	ECodeQuotaExceeded            = "error.quota.exceeded"
	ECodeEscrowNotFound           = "error.escrow.not_found"
	ECodeDirectoryNotFound        = "error.directory.not_found"
	ECodeDirectoryVersionConflict = "error.directory.version_conflict"
	ECodeIdentityKeyMismatch      = "error.directory.identity_key_mismatch"

	ECodeEnrollmentCodeRefused = "error.enrollment.code_refused"
	ECodeRelayChannelNotFound  = "error.relay.channel_not_found"
	ECodeRelayMailboxFull      = "error.relay.mailbox_full"

	// Per-account caps (429): the code names the cap that refused.
	ECodeLimitRelayChannels      = "error.limit.relay_channels"
	ECodeLimitRelayBytes         = "error.limit.relay_bytes"
	ECodeLimitDirectoryPublishes = "error.limit.directory_publishes"

	ECodeShareNotFound     = "error.share.not_found"
	ECodeShareIDTaken      = "error.share.id_taken"
	ECodeShareBlobNotOwned = "error.share.blob_not_owned"
	// ECodeLimitShares: the account's share links, or the blobs its live
	// links serve together, are at their cap (429).
	ECodeLimitShares = "error.limit.shares"

	ECodeOpProtocolMismatch  = "error.op.protocol_mismatch"
	ECodeOpStaleChain        = "error.op.stale_chain"
	ECodeOpForeignAuthor     = "error.op.foreign_author"
	ECodeOpMetadataMismatch  = "error.op.metadata_mismatch"
	ECodeOpBlobMissing       = "error.op.blob_missing"
	ECodeUpgradeInFlight     = "error.album.upgrade_in_flight"
	ECodeUpgradeBadTarget    = "error.upgrade.bad_target"
	ECodeUpgradeNotQuiescent = "error.upgrade.not_quiescent"

	ECodeTransferNotFound = "error.transfer.not_found"
	ECodeOffsetMismatch   = "error.transfer.offset_mismatch"
	ECodeTransferLocked   = "error.transfer.locked"

	ECodeLimitUploadSessions = "error.limit.upload_sessions"
	ECodeLimitTransfers      = "error.limit.transfers"
	ECodeLimitPendingBytes   = "error.limit.pending_bytes"
	// ECodeLimitUploadBuffer (429): the account's uploads in flight hold
	// the memory one account may use for them; ECodeUploadBufferFull (503):
	// all uploads in flight hold the memory the server gives them.
	ECodeLimitUploadBuffer = "error.limit.upload_buffer"
	ECodeUploadBufferFull  = "error.limit.upload_buffer_total"
)
