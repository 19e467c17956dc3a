package server

import (
	"strconv"
	"strings"

	"sealbox/server/ids"
)

// Token prefixes, one per token type.
const (
	prefixMFA    = "sbx_mfa_"
	prefixUpload = "sbx_up_"
	// Access tokens ("sbx_at_") name their account and refresh tokens
	// ("sbx_rt_") their chain: kv.AccessToken and kv.RefreshToken spell
	// them.
	// prefixChallenge marks a revoke-all (global sign-out) challenge.
	prefixChallenge = "sbx_ch_"
	// prefixEnrollCode marks the full spelling of an enrollment code.
	prefixEnrollCode = "sbx_en_"
	// prefixChannel marks a relay channel handle.
	prefixChannel = "sbx_rl_"
)

// newToken returns a fresh bearer secret of the given type.
func (s *Server) newToken(prefix string) string { return ids.Token(s.cfg.Rand, prefix) }

// newUUID returns a fresh server-minted id (user_id, session_id).
func (s *Server) newUUID() string { return ids.UUID(s.cfg.Rand) }

// claimID names one request's claim among every node's (a lease holder, a
// password verification in flight): this node's name and a number it has
// not used before.
func (s *Server) claimID() string {
	return s.node + "/" + strconv.FormatUint(s.nextClaim.Add(1), 10)
}

// mustRead fills b with random bytes (secrets, nonces).
func (s *Server) mustRead(b []byte) { ids.Fill(s.cfg.Rand, b) }

// Server-minted tokens taken from a request path are checked for shape
// before the store is asked. One rule for every type: a value no token of the
// type can ever have is a malformed parameter (400); a well-formed one the
// store does not know is the resource's not-found answer (404), whatever its
// length, since tokens carry at least 256 bits (server/PROTOCOL.md §0), not exactly 256.
// Tokens taken from a JSON body (refresh token, mfa_token, revoke-all
// challenge, enrollment code) are well-typed strings, so any value gets the
// endpoint's own refusal (401 or 404), never 400.
var (
	isUploadID  = isToken(prefixUpload)
	isChannelID = isToken(prefixChannel)
)

// isToken returns the shape check of the token type prefix: the prefix, then
// one or more characters of the base64url alphabet.
func isToken(prefix string) func(string) bool {
	return func(s string) bool {
		rest, ok := strings.CutPrefix(s, prefix)
		if !ok || rest == "" {
			return false
		}
		for i := 0; i < len(rest); i++ {
			c := rest[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
		return true
	}
}
