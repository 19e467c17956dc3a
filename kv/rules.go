package kv

import (
	"strings"
	"unicode/utf8"
)

// The value rules of accounts, in one place for every way an account is
// made (registration, login, the operator's `users add`).

// NormalizeEmail trims and lowercases an address and checks its shape:
// 3–254 characters, exactly one @, a non-empty local part and domain
// (RuleEmail).
func NormalizeEmail(raw string) (string, error) {
	email := strings.ToLower(strings.TrimSpace(raw))
	n := utf8.RuneCountInString(email)
	at := strings.IndexByte(email, '@')
	if n < 3 || n > 254 || at <= 0 || at == len(email)-1 || strings.Count(email, "@") != 1 {
		return "", refuse(RuleEmail)
	}
	return email, nil
}

// MaxPasswordLen bounds every password, set or presented.
const MaxPasswordLen = 1024

// CheckNewPassword applies the rule for a password being set: 8–1024
// characters (RuleNewPassword).
func CheckNewPassword(pw string) error {
	if n := utf8.RuneCountInString(pw); n < 8 || n > MaxPasswordLen {
		return refuse(RuleNewPassword)
	}
	return nil
}
