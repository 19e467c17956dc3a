//go:build !unix

package cli

// lockNodeID does nothing where flock(2) does not exist: one serve per data
// directory is then the operator's to keep.
func lockNodeID(string) (func(), error) { return func() {}, nil }
