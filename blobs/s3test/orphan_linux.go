package s3test

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill the gateway when the test process
// dies without calling Stop (a test timeout's panic, a kill).
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
