//go:build !linux

package witnesstest

import "os/exec"

// dieWithParent does nothing here: only Linux offers a parent-death
// signal, so a test process that dies without stopping it leaves it.
func dieWithParent(*exec.Cmd) {}
