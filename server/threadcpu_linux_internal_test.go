package server

import (
	"runtime"
	"syscall"
	"time"
)

// onThreadCPU returns the CPU time fn takes on its own OS thread, which
// other processes on a busy machine do not inflate as they do wall time.
func onThreadCPU(fn func()) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const rusageThread = 1 // RUSAGE_THREAD
	var before, after syscall.Rusage
	syscall.Getrusage(rusageThread, &before)
	fn()
	syscall.Getrusage(rusageThread, &after)
	cpu := func(r syscall.Rusage) time.Duration {
		return time.Duration(r.Utime.Nano() + r.Stime.Nano())
	}
	return cpu(after) - cpu(before)
}
