package server

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"

	"sealbox/kv"
	"sealbox/kv/fault"
)

// Value rules several resources use live here, once.

// normalizeEmail is kv's rule for an email address (kv.RuleEmail, worded
// by refusalWording).
var normalizeEmail = kv.NormalizeEmail

// checkNewPassword applies kv's rule for a password being set
// (kv.RuleNewPassword) to the request field field: the refusal names it.
func checkNewPassword(field, pw string) error {
	if err := kv.CheckNewPassword(pw); err != nil {
		return fault.FieldErrorf(fault.ErrorCode(err), field, "%s must be 8 to 1024 characters", field)
	}
	return nil
}

// checkPresentedPassword applies the rule for a password being verified:
// any string up to 1024 characters (an empty one fails verification).
func checkPresentedPassword(field, pw string) error {
	if utf8.RuneCountInString(pw) > kv.MaxPasswordLen {
		return invalid(field, "%s must be at most 1024 characters", field)
	}
	return nil
}

// parseUUID accepts a UUID in the 8-4-4-4-12 hex form (either case) and
// returns it canonical lowercase.
func parseUUID(s string) (string, bool) {
	if len(s) != 36 {
		return "", false
	}
	for i := 0; i < 36; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return "", false
			}
		default:
			if !isHex(c) {
				return "", false
			}
		}
	}
	return strings.ToLower(s), true
}

// isCanonicalUUID accepts only the canonical lowercase hyphenated form.
func isCanonicalUUID(s string) bool {
	canon, ok := parseUUID(s)
	return ok && canon == s
}

// isDigits reports whether s is exactly n ASCII digits (no sign, space or
// other script's digits).
func isDigits(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// usableCohortHash: 1–128 characters of [A-Za-z0-9_=+/-].
func usableCohortHash(s string) bool {
	if len(s) < 1 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '_' || c == '=' || c == '+' || c == '/' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// pathParam returns the path parameter name when valid accepts it; anything
// else is a malformed path parameter (400).
func pathParam(ps httprouter.Params, name string, valid func(string) bool) (string, error) {
	v := ps.ByName(name)
	if !valid(v) {
		return "", fault.FieldErrorf(fault.ECodeMalformed, name, "the path parameter %s is malformed", name)
	}
	return v, nil
}

// isOpaqueID accepts a share link id: 128 bits as 32 lowercase hex
// characters.
func isOpaqueID(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// isProtocolDate accepts a protocol date: YYYY-MM-DD, a real calendar day.
func isProtocolDate(v string) bool {
	_, err := time.Parse(time.DateOnly, v)
	return err == nil && len(v) == len(time.DateOnly)
}

// speaksProtocol reports whether the protocol date v is within the range the
// server speaks. YYYY-MM-DD strings compare in date order.
func (s *Server) speaksProtocol(v string) bool {
	return v >= s.cfg.ProtocolMin && v <= s.cfg.ProtocolMax
}

// checkSignedProtocol refuses a signed envelope's protocol_version outside
// the range the server speaks; field names the member and what names the
// signed document ("manifest", "tombstone") in the message.
func (s *Server) checkSignedProtocol(v, field, what string) error {
	if s.speaksProtocol(v) {
		return nil
	}
	return &fault.Error{
		Code: fault.ECodeProtocolUnsupported, Field: field,
		Message: "the " + what + "'s protocol_version is outside the range the server speaks",
		Details: map[string]any{"protocol_min": s.cfg.ProtocolMin, "protocol_max": s.cfg.ProtocolMax},
	}
}
