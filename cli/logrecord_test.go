package cli

import (
	"errors"
	"strings"
	"testing"
)

const (
	hashA = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	hashB = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
)

// TestParseLogRecord: a directory record is read field by field; a record
// of another kind is reported as unknown with its kind, not refused as
// malformed; a malformed directory record is refused.
func TestParseLogRecord(t *testing.T) {
	good := "sealbox-directory/v1 u-1 12 " + hashA + " " + hashB + "\n"
	r, err := parseLogRecord([]byte(good))
	if err != nil || r != (logRecord{Kind: kindDirectory, UserID: "u-1", Version: 12, DirectoryHash: hashA, KeyHash: hashB}) {
		t.Fatalf("%q: %+v, %v", good, r, err)
	}
	reset := "sealbox-directory-reset/v1 u-1 13 " + hashB + "\n"
	if r, err := parseLogRecord([]byte(reset)); err != nil || r != (logRecord{Kind: kindDirectoryReset, UserID: "u-1", Version: 13, KeyHash: hashB}) {
		t.Fatalf("%q: %+v, %v", reset, r, err)
	}
	if r, err := parseLogRecord([]byte("sealbox-directory-move/v2 u-1 13\n")); !errors.Is(err, errUnknownRecord) || r.Kind != "sealbox-directory-move/v2" {
		t.Fatalf("an unknown kind: %+v, %v", r, err)
	}
	for _, tc := range []struct{ name, rec string }{
		{"no newline", strings.TrimSuffix(good, "\n")},
		{"two lines", good + good},
		{"a field short", "sealbox-directory/v1 u-1 12 " + hashA + "\n"},
		{"a double space", "sealbox-directory/v1 u-1  12 " + hashA + " " + hashB + "\n"},
		{"a signed version", "sealbox-directory/v1 u-1 +12 " + hashA + " " + hashB + "\n"},
		{"a leading zero", "sealbox-directory/v1 u-1 012 " + hashA + " " + hashB + "\n"},
		{"upper-case hex", "sealbox-directory/v1 u-1 12 " + strings.ToUpper(hashA) + " " + hashB + "\n"},
		{"a short hash", "sealbox-directory/v1 u-1 12 " + hashA[1:] + " " + hashB + "\n"},
		{"no user", "sealbox-directory/v1  12 " + hashA + " " + hashB + "\n"},
		{"a reset with a directory hash", "sealbox-directory-reset/v1 u-1 13 " + hashA + " " + hashB + "\n"},
		{"a reset without its key", "sealbox-directory-reset/v1 u-1 13\n"},
		{"a reset's short key hash", "sealbox-directory-reset/v1 u-1 13 " + hashB[2:] + "\n"},
	} {
		if _, err := parseLogRecord([]byte(tc.rec)); err == nil || errors.Is(err, errUnknownRecord) {
			t.Errorf("%s: %v, want a malformed record", tc.name, err)
		}
	}
}

// FuzzParseLogRecord: any bytes (a log holds what a server wrote) give a
// record or an error, never a panic, and a record read back prints the
// same bytes.
func FuzzParseLogRecord(f *testing.F) {
	f.Add([]byte("sealbox-directory/v1 u-1 12 " + hashA + " " + hashB + "\n"))
	f.Add([]byte("sealbox-directory-reset/v1 u-1 13 " + hashB + "\n"))
	f.Add([]byte("\n"))
	f.Fuzz(func(t *testing.T, rec []byte) {
		r, err := parseLogRecord(rec)
		if err != nil {
			return
		}
		if back := r.String(); back != string(rec) {
			t.Fatalf("%q read as %+v, which prints %q", rec, r, back)
		}
	})
}

// TestParseAccountDeletedRecord: the record of an account's deletion has a
// reset's fields, and is written back as the log holds it.
func TestParseAccountDeletedRecord(t *testing.T) {
	rec := "sealbox-account-deleted/v1 u-1 0 " + hashB + "\n"
	r, err := parseLogRecord([]byte(rec))
	if err != nil || r != (logRecord{Kind: kindAccountDeleted, UserID: "u-1", KeyHash: hashB}) || r.String() != rec {
		t.Fatalf("%q: %+v, %v", rec, r, err)
	}
	if _, err := parseLogRecord([]byte("sealbox-account-deleted/v1 u-1 0 " + hashA + " " + hashB + "\n")); err == nil || errors.Is(err, errUnknownRecord) {
		t.Fatalf("a deletion with a directory hash: %v, want a malformed record", err)
	}
}
