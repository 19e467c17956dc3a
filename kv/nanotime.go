package kv

import (
	"time"

	"github.com/fxamacker/cbor/v2"
)

// nanoTime is a time stored as a CBOR integer of Unix nanoseconds, for the
// records read in bulk on hot paths (sessions, cohorts): exact to the
// nanosecond, like the keys built from the same times (timeKey), and far
// cheaper to decode than RFC 3339 text. The zero time is stored as 0.
type nanoTime int64

func toNano(t time.Time) nanoTime {
	if t.IsZero() {
		return 0
	}
	return nanoTime(t.UnixNano())
}

func (n nanoTime) Time() time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(n)).UTC()
}

// UnmarshalCBOR also reads the RFC 3339 text earlier records were written
// with.
func (n *nanoTime) UnmarshalCBOR(b []byte) error {
	var i int64
	if err := cbor.Unmarshal(b, &i); err == nil {
		*n = nanoTime(i)
		return nil
	}
	var t time.Time
	if err := decMode.Unmarshal(b, &t); err != nil {
		return err
	}
	*n = toNano(t)
	return nil
}
