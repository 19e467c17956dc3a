//go:build !race

package server

// raceOn reports whether the race detector is on: it slows every
// instruction, which the timing tests allow for.
const raceOn = false
