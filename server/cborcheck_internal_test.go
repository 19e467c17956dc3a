package server

import (
	"testing"
	"time"
)

// checkLimits are the limit sets the checker runs with: the upgrade's and
// the directory's, and the smallest the decoder accepts, so that every
// limit is reached by short inputs.
var checkLimits = []cborLimits{
	upgradeLimits,
	directoryLimits,
	{MaxNestedLevels: 4, MaxArrayElements: 16, MaxMapPairs: 16},
}

// FuzzWellFormed: the iterative checker gives fxamacker's verdict on
// well-formedness, within the same limits, for every input.
func FuzzWellFormed(f *testing.F) {
	for _, body := range bodyShapes() {
		f.Add(body)
	}
	for _, seed := range []string{
		"", "\x00", "\xff", "\xf8\x1f", "\xf8\x20", "\x1c", "\x5f\x41a\xff", "\x5f\x61a\xff", "\x5f\x5f\xff\xff",
		"\x9f\xff", "\xbf\x00\xff", "\xbf\x00\x00\xff", "\xc1\xc1\x81\x81\x00", "\xd9\xd9\xf7\xa0", "\x9f\xc1\xff",
		"\x82\x00", "\xa1\x00", "\x81\x81\x81\x81\x00", "\x81\x81\x81\x81\x81\x00", "\xc1\xc1\xc1\xc1\xc1\x00",
		"\x91" + string(make([]byte, 17)), "\xb1" + string(make([]byte, 34)), "\x9f" + string(make([]byte, 17)) + "\xff",
		"\x7b\xff\xff\xff\xff\xff\xff\xff\xff", "\x9b\x80\x00\x00\x00\x00\x00\x00\x00", "\xfb\x7f\xf8\x00\x00\x00\x00\x00\x00",
	} {
		f.Add([]byte(seed))
	}
	modes := make([]interface{ Wellformed([]byte) error }, len(checkLimits))
	for i, lim := range checkLimits {
		modes[i] = lim.decMode()
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for i, lim := range checkLimits {
			want := modes[i].Wellformed(b) == nil
			if got := wellFormed(b, lim); got != want {
				t.Fatalf("limits %+v: wellFormed(%x) = %v, the decoder says %v", lim, b, got, want)
			}
			if _, ok := topLevelMap(lim, b); ok && !want {
				t.Fatalf("limits %+v: topLevelMap accepted %x, which the decoder refuses", lim, b)
			}
		}
	})
}

// Every 64 KiB shape of intent costs the owner's start under 5 ms of CPU
// (the race detector's ten times that), the deepest included; the checker
// itself uses no recursion, so depth costs no goroutine stack. The CPU
// time is the mean of twenty runs, measured on the calling thread.
func TestUpgradeBodyCost(t *testing.T) {
	bound := 5 * time.Millisecond
	if raceOn {
		bound *= 10
	}
	for name, body := range bodyShapes() {
		const runs = 20
		each := onThreadCPU(func() {
			for range runs {
				decodeUpgradeIntent(body)
				wellFormed(body, upgradeLimits) // as a tombstone
			}
		}) / runs
		t.Logf("%s: %v", name, each)
		if each > bound {
			t.Errorf("%s: %v, want under %v", name, each, bound)
		}
	}
}
