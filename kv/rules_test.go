package kv_test

import (
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
		err := kv.CheckNewPassword("new_password", tc.pw)
		if (err == nil) != tc.ok {
			t.Errorf("%d characters: %v", len([]rune(tc.pw)), err)
		}
		if err != nil {
			var e *fault.Error
			if !asError(err, &e) || e.Field != "new_password" {
				t.Errorf("the refusal names field %q", e.Field)
			}
		}
	}
}
