package kv_test

import (
	"errors"
	"strings"
	"testing"

	"sealbox/kv"
	"sealbox/kv/fault"
)

func TestNormalizeEmail(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"  Alice@Example.ORG ", "alice@example.org"},
		{"a@b", "a@b"},
		{"a@", ""},
		{"@b.c", ""},
		{"ab", ""},
		{"a@b@c", ""},
		{strings.Repeat("a", 250) + "@b.cd", ""},
	} {
		got, err := kv.NormalizeEmail(tc.in)
		if tc.want == "" {
			if fault.ErrorCode(err) != fault.ECodeInvalid {
				t.Errorf("%q: %q %v, want refused", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %q %v, want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestCheckNewPassword(t *testing.T) {
	for _, tc := range []struct {
		pw string
		ok bool
	}{
		{"1234567", false},
		{"12345678", true},
		{strings.Repeat("é", 1024), true},
		{strings.Repeat("x", 1025), false},
	} {
		err := kv.CheckNewPassword(tc.pw)
		if (err == nil) != tc.ok {
			t.Errorf("%d characters: %v", len([]rune(tc.pw)), err)
		}
		if err != nil {
			// The rule, not a request field: the server names the field.
			var r *kv.Refusal
			if !errors.As(err, &r) || r.Rule != kv.RuleNewPassword || fault.ErrorCode(err) != fault.ECodeInvalid {
				t.Errorf("the refusal: %#v, want kv.RuleNewPassword with error.request.invalid", err)
			}
		}
	}
}
