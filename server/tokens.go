package server

import "sealbox/server/ids"

// Token prefixes, one per token type.
const (
	prefixAccess  = "sbx_at_"
	prefixRefresh = "sbx_rt_"
)

// newToken returns a fresh bearer secret of the given type.
func (s *Server) newToken(prefix string) string { return ids.Token(s.cfg.Rand, prefix) }

// newUUID returns a fresh server-minted id (user_id, session_id).
func (s *Server) newUUID() string { return ids.UUID(s.cfg.Rand) }
