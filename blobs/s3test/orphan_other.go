//go:build !linux

package s3test

import "os/exec"

// dieWithParent does nothing here: only Linux offers a parent-death
// signal, so a test process that dies without Stop leaves the gateway.
func dieWithParent(*exec.Cmd) {}
