package server

import "sealbox/server/ids"

// Token prefixes, one per token type.
const (
	prefixAccess  = "sbx_at_"
	prefixRefresh = "sbx_rt_"
	prefixMFA     = "sbx_mfa_"
	prefixUpload  = "sbx_up_"
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

// mustRead fills b with random bytes (secrets, nonces).
func (s *Server) mustRead(b []byte) { ids.Fill(s.cfg.Rand, b) }
