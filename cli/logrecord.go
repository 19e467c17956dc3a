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
	// Version is the directory version published.
	Version uint64
	// DirectoryHash and KeyHash are the SHA-256 of the directory's bytes and
	// of the pinned identity key, in lowercase hex.
	DirectoryHash, KeyHash string
}

// errUnknownRecord is a record of a kind this sealbox does not know (one a
// newer server writes): an auditor reports it and reads on.
var errUnknownRecord = errors.New("a record of a kind this sealbox does not know")

// kindDirectory is the record of a directory publish.
const kindDirectory = "sealbox-directory/v1"

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
		r.UserID, r.DirectoryHash, r.KeyHash = fields[1], fields[3], fields[4]
		v, err := strconv.ParseUint(fields[2], 10, 64)
		if err != nil || strconv.FormatUint(v, 10) != fields[2] {
			return r, fmt.Errorf("a %s record's version %q is not a decimal number", r.Kind, fields[2])
		}
		r.Version = v
		if r.UserID == "" || !isHexSHA256(r.DirectoryHash) || !isHexSHA256(r.KeyHash) {
			return r, fmt.Errorf("a %s record needs a user id and two lowercase hex SHA-256 hashes", r.Kind)
		}
		return r, nil
	default:
		return r, errUnknownRecord
	}
}

func isHexSHA256(s string) bool {
	return len(s) == 64 && strings.Trim(s, "0123456789abcdef") == ""
}
