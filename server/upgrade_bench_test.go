package server

import (
	"strings"
	"testing"
)

// bodyShapes are 64 KiB upgrade intents of the shapes that cost a
// recursive decoder most, each as a whole body and, where the top level
// must be a map to get further, as the value of one key.
func bodyShapes() map[string][]byte {
	const size = 64 << 10
	inMap := func(value string) []byte { return []byte("\xa1\x61k" + value) }
	repeat := func(unit string, total int) string { return strings.Repeat(unit, total/len(unit)) }
	return map[string][]byte{
		"65534 nested arrays":            []byte(repeat("\x81", size-2) + "\x00"),
		"nested arrays in a map":         inMap(repeat("\x81", size-4) + "\x00"),
		"nested maps":                    []byte(repeat("\xa1\x00", size-2) + "\x00"),
		"nested tags in a map":           inMap(repeat("\xc1", size-4) + "\x00"),
		"nested indefinite arrays":       inMap(repeat("\x9f", size/2-2) + repeat("\xff", size/2-2)),
		"one long array":                 inMap("\x9a\x00\x00\xff\xf0" + repeat("\xf6", size-8)),
		"many text keys":                 []byte("\xbf" + repeat("\x64kkkk\x00", size-2) + "\xff"),
		"many distinct text keys":        distinctKeys(size),
		"text in one-byte chunks":        inMap("\x7f" + repeat("\x61a", size-6) + "\xff"),
		"truncated deep body":            []byte(repeat("\x81", size)),
		"definite array claiming 2^32-1": inMap("\x9a\xff\xff\xff\xff" + repeat("\x00", size-8)),
	}
}

// distinctKeys is a map of about size bytes with distinct text keys.
func distinctKeys(size int) []byte {
	b := []byte{0xbf}
	for i := 0; len(b) < size-8; i++ {
		b = append(b, 0x64, byte('a'+i%26), byte('a'+i/26%26), byte('a'+i/676%26), byte('a'+i/17576%26), 0x00)
	}
	return append(b, 0xff)
}

// BenchmarkUpgradeBodies: what the owner's start (parsing the intent) and
// commit (checking the tombstone) cost the server for each 64 KiB shape
// (issue 24 §2: under 5 ms).
func BenchmarkUpgradeBodies(b *testing.B) {
	for name, body := range bodyShapes() {
		b.Run("intent/"+name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				decodeUpgradeIntent(body)
			}
		})
		b.Run("tombstone/"+name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				wellFormed(body, upgradeLimits)
			}
		})
	}
}
