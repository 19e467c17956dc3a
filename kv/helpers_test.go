package kv_test

import (
	"bytes"
	"os"
	"testing"
)

// assertFileLacks fails if the raw file at path contains any of secrets.
func assertFileLacks(tb testing.TB, path string, secrets ...string) {
	tb.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	for _, s := range secrets {
		if bytes.Contains(raw, []byte(s)) {
			tb.Fatalf("the database file holds the secret %q", s)
		}
	}
}
