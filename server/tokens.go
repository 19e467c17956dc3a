package server

import (
	"encoding/base64"
	"fmt"
	"io"
)

// Token prefixes name a token's type at a glance (in a bug report, a leaked
// secret scanner), never its owner.
const (
	prefixAccess  = "sbx_at_"
	prefixRefresh = "sbx_rt_"
	// prefixChallenge marks a revoke-all (global sign-out) challenge.
	prefixChallenge = "sbx_ch_"
	// prefixEnrollCode marks the full spelling of an enrollment code.
	prefixEnrollCode = "sbx_en_"
	// prefixChannel marks a relay channel handle.
	prefixChannel = "sbx_rl_"
)

// newToken returns prefix followed by 256 random bits, base64url without
// padding.
func (s *Server) newToken(prefix string) string {
	var b [32]byte
	s.mustRead(b[:])
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// newUUID returns a random (version 4) UUID in canonical lowercase form.
func (s *Server) newUUID() string {
	var b [16]byte
	s.mustRead(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// mustRead fills b from the randomness source. crypto/rand does not fail on
// supported platforms; if it ever did, serving predictable tokens would be
// worse than stopping.
func (s *Server) mustRead(b []byte) {
	if _, err := io.ReadFull(s.cfg.Rand, b); err != nil {
		panic(fmt.Sprintf("sealbox: randomness source failed: %v", err))
	}
}
