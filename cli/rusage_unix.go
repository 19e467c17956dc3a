//go:build linux

package cli

import (
	"os"
	"syscall"
)

// peakRSS is the largest resident set of a finished child process, in
// bytes (Linux reports it in KiB).
func peakRSS(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss << 10
	}
	return 0
}
