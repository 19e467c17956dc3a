package cli

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// logRecord is one record of the transparency log, as parseLogRecord reads
// it (server/PROTOCOL.md §16).
type logRecord struct {
	// Kind is the record's first field, e.g. sealbox-directory/v1.
	Kind string
	// UserID is the account the record is about.
	UserID string
	// Version is the directory version published, or, in a reset, the
	// version the reset cleared.
	Version uint64
	// DirectoryHash and KeyHash are the SHA-256 of the directory's bytes and
	// of the pinned identity key (in a reset: the key it unpinned), in
	// lowercase hex. A reset has no DirectoryHash.
	DirectoryHash, KeyHash string
}

// String writes the record back as the log holds it.
func (r logRecord) String() string {
	if r.Kind == kindDirectoryReset || r.Kind == kindAccountDeleted {
		return fmt.Sprintf("%s %s %d %s\n", r.Kind, r.UserID, r.Version, r.KeyHash)
	}
	return fmt.Sprintf("%s %s %d %s %s\n", r.Kind, r.UserID, r.Version, r.DirectoryHash, r.KeyHash)
}

// errUnknownRecord is a record of a kind this sealbox does not know (one a
// newer server writes): an auditor reports it and reads on.
var errUnknownRecord = errors.New("a record of a kind this sealbox does not know")

// The kinds of record: a directory publish, and the operator's reset of an
// account's directory (sealbox users reset-directory), which unpins its key.
const (
	kindDirectory      = "sealbox-directory/v1"
	kindDirectoryReset = "sealbox-directory-reset/v1"
	// kindAccountDeleted ends an account (deleted by its owner or the
	// operator): a reset after which no record of the user id follows.
	kindAccountDeleted = "sealbox-account-deleted/v1"
)

// parseLogRecord reads one record of the log: its kind, then the fields
// that kind has, single spaces between, a newline at the end. Every kind of
// record is read here, so a new kind is one more case. A record of an
// unknown kind returns its Kind (when it has one) and errUnknownRecord; a
// malformed record of a known kind is another error.
func parseLogRecord(rec []byte) (logRecord, error) {
	line, ok := bytes.CutSuffix(rec, []byte("\n"))
	if !ok || bytes.ContainsAny(line, "\n\r") {
		return logRecord{}, errors.New("a record is one line ending in a newline")
	}
	fields := strings.Split(string(line), " ")
	r := logRecord{Kind: fields[0]}
	switch r.Kind {
	case kindDirectory:
		if len(fields) != 5 {
			return r, fmt.Errorf("a %s record has 5 fields, not %d", r.Kind, len(fields))
		}
		r.DirectoryHash = fields[3]
		if !isHexSHA256(r.DirectoryHash) {
			return r, fmt.Errorf("a %s record's directory hash is not a lowercase hex SHA-256", r.Kind)
		}
	case kindDirectoryReset, kindAccountDeleted:
		if len(fields) != 4 {
			return r, fmt.Errorf("a %s record has 4 fields, not %d", r.Kind, len(fields))
		}
	default:
		return r, errUnknownRecord
	}
	r.UserID, r.KeyHash = fields[1], fields[len(fields)-1]
	v, err := strconv.ParseUint(fields[2], 10, 64)
	if err != nil || strconv.FormatUint(v, 10) != fields[2] {
		return r, fmt.Errorf("a %s record's version %q is not a decimal number", r.Kind, fields[2])
	}
	r.Version = v
	if r.UserID == "" || !isHexSHA256(r.KeyHash) {
		return r, fmt.Errorf("a %s record needs a user id and the key's lowercase hex SHA-256", r.Kind)
	}
	return r, nil
}

func isHexSHA256(s string) bool {
	return len(s) == 64 && strings.Trim(s, "0123456789abcdef") == ""
}
