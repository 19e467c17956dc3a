//go:build !linux

package cli

import "os"

// peakRSS is not measured here: only Linux reports it in a known unit.
func peakRSS(*os.ProcessState) int64 { return 0 }
