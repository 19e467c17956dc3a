package server

import (
	"log"
	"strings"

	"github.com/rs/zerolog"
)

// stdLog is a standard library logger whose every line becomes a warning
// of l, so what net/http logs on its own (TLS handshake errors, a panic
// in a handler it recovered, Accept errors) is a JSON line like every
// other instead of plain text on standard error.
func stdLog(l zerolog.Logger) *log.Logger {
	return log.New(stdLogWriter{l}, "", 0)
}

type stdLogWriter struct{ log zerolog.Logger }

func (w stdLogWriter) Write(p []byte) (int, error) {
	w.log.Warn().Str("source", "net/http").Msg(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
