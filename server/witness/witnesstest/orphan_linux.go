package witnesstest

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel kill the process when the test process dies
// without stopping it (a test timeout's panic, a kill).
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
