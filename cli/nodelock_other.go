//go:build !unix

package cli

import "errors"

// errDataDirLocked is never returned where flock(2) does not exist.
var errDataDirLocked = errors.New("another sealbox process holds the data directory's lock")

// lockDataDir does nothing where flock(2) does not exist: one serve per data
// directory, and compact only with it stopped, are then the operator's to
// keep.
func lockDataDir(string) (func(), error) { return func() {}, nil }
