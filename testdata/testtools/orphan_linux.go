package testtools

import (
	"os/exec"
	"syscall"
)

// DieWithParent has the kernel kill cmd's process when the test process
// dies without stopping it (a test timeout's panic, a kill).
func DieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
