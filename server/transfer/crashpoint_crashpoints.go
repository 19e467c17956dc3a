//go:build crashpoints && unix

package transfer

import (
	"os"
	"syscall"
)

// crashAt names the crash point at which a binary built for the crash test
// kills itself.
var crashAt = os.Getenv("SEALBOXTEST_CRASH_AT")

// crashPoint kills the process with SIGKILL, so that no deferred code
// runs, when step is the one SEALBOXTEST_CRASH_AT names. Only binaries
// built with -tags crashpoints (cli's crash test) have this; the production
// crashPoint does nothing.
func crashPoint(step string) {
	if step != "" && step == crashAt {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
}
