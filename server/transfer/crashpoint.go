//go:build !crashpoints

package transfer

// crashPoint marks a step between two writes that must each survive a
// crash on their own. It does nothing: the crash test builds the binary
// with -tags crashpoints, whose crashPoint can kill the process there.
func crashPoint(string) {}
