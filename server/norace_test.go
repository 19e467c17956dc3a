//go:build !race

package server_test

// raceEnabled reports whether the race detector is on: it multiplies memory
// use and slows every request, which the load tests take into account.
const raceEnabled = false
