package fault

// The error catalog's HTTP part: codes only the HTTP layer answers with.
// The domain never returns one (kv's TestDomainSpeaksNoWire). Codes are part
// of the public contract: never rename one.
const (
	// Request syntax and framing.
	ECodeMalformed        = "error.request.malformed"
	ECodeUnsupportedMedia = "error.request.unsupported_media_type"
	ECodeTooLarge         = "error.request.too_large"
	// ECodeDirectoryMalformed: a directory body the server cannot parse.
	ECodeDirectoryMalformed = "error.directory.malformed"

	// Routing and the server's own state.
	ECodeNotFound         = "error.not_found"
	ECodeMethodNotAllowed = "error.method_not_allowed"
	ECodeInternal         = "error.internal"
	ECodeNotReady         = "error.not_ready"

	// The protocol's headers and the request checks before a handler runs.
	ECodeRegistrationClosed  = "error.registration.closed"
	ECodeReauthRequired      = "error.auth.reauth_required"
	ECodeProofRequired       = "error.auth.proof_required"
	ECodeProtocolUnsupported = "error.protocol.unsupported"
	ECodeTusVersion          = "error.tus.version"
)
