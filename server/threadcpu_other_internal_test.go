//go:build !linux

package server

import "time"

// onThreadCPU returns the wall time fn takes: elsewhere than on Linux, no
// clock of one thread's CPU time is at hand.
func onThreadCPU(fn func()) time.Duration {
	start := time.Now()
	fn()
	return time.Since(start)
}
