//go:build !linux

package testtools

import "os/exec"

// DieWithParent does nothing here: only Linux offers a parent-death
// signal, so a test process that dies without stopping cmd leaves it.
func DieWithParent(*exec.Cmd) {}
