package blobs_test

import (
	"encoding/hex"
	"strings"
	"testing"

	"sealbox/blobs"
)

const validHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" // SHA-256 of ""

func TestValidHash(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{validHash, true},
		{strings.Repeat("0", 64), true},
		{strings.Repeat("f", 64), true},
		{"", false},
		{validHash[:63], false},
		{validHash + "0", false},
		{strings.ToUpper(validHash), false},
		{"E" + validHash[1:], false},
		{"g" + validHash[1:], false},
		{validHash[:63] + "/", false},
		{validHash[:63] + "\x00", false},
		{"é" + validHash[2:], false}, // 64 bytes, not 64 characters of hex
	} {
		if got := blobs.ValidHash(tc.in); got != tc.want {
			t.Errorf("ValidHash(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func FuzzValidHash(f *testing.F) {
	f.Add(validHash)
	f.Add(strings.ToUpper(validHash))
	f.Add(validHash[:63])
	f.Add("../" + validHash[3:])
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		_, err := hex.DecodeString(s)
		want := len(s) == 64 && err == nil && s == strings.ToLower(s)
		if got := blobs.ValidHash(s); got != want {
			t.Errorf("ValidHash(%q) = %v, want %v", s, got, want)
		}
	})
}
