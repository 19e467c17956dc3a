package cli

import (
	"net"

	"github.com/rs/zerolog"

	"sealbox/server"
)

// warnOpenRegistration warns, at every start, that anyone who reaches the
// server can create an account, unless the server listens on loopback
// without a trusted proxy: the one case where only this machine's users
// can reach it. A reverse proxy (--trust-proxy) on loopback brings the
// internet in, so it is warned about too.
func warnOpenRegistration(log zerolog.Logger, cfg server.Config, addr net.Addr) {
	if cfg.Registration != "open" || isLoopback(addr) && !cfg.TrustProxy {
		return
	}
	reach := "an address other hosts can reach"
	if isLoopback(addr) {
		reach = "loopback behind a reverse proxy (--trust-proxy), so from wherever the proxy is reachable"
	}
	log.Warn().Str("listen", addr.String()).Bool("trust_proxy", cfg.TrustProxy).
		Msg("registration is open on " + reach + ": anyone who reaches it can create an account (for a family: --registration invite, then sealbox users invite)")
}
