package fault_test

import (
	"errors"
	"fmt"
	"testing"

	"sealbox/kv/fault"
)

// TestErrorCode: the code is found through wrapping, and only on a fault.
func TestErrorCode(t *testing.T) {
	e := fault.FieldErrorf(fault.ECodeInvalid, "email", "email must hold one @, not %d", 2)
	if e.Field != "email" || e.Error() != "error.request.invalid: email must hold one @, not 2" {
		t.Fatalf("FieldErrorf: %+v %q", e, e.Error())
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{e, fault.ECodeInvalid},
		{fmt.Errorf("while signing in: %w", fault.Errorf(fault.ECodeAccountLocked, "locked")), fault.ECodeAccountLocked},
		{errors.Join(errors.New("disk"), fault.Errorf(fault.ECodeNotFound, "gone")), fault.ECodeNotFound},
		{errors.New("plain"), ""},
		{nil, ""},
	} {
		if got := fault.ErrorCode(tc.err); got != tc.want {
			t.Errorf("ErrorCode(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
	if got := (&fault.Error{Code: fault.ECodeInternal}).Error(); got != fault.ECodeInternal {
		t.Fatalf("an error without a message reads %q", got)
	}
}
