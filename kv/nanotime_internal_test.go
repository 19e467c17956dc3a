package kv

import (
	"testing"
	"time"
)

func TestNanoTimeRoundTripsAndReadsText(t *testing.T) {
	for _, want := range []time.Time{time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.UTC), {}} {
		var got struct {
			T nanoTime `cbor:"1,keyasint"`
		}
		if err := decode(encode(&struct {
			T nanoTime `cbor:"1,keyasint"`
		}{toNano(want)}), &got); err != nil || !got.T.Time().Equal(want) {
			t.Fatalf("round trip of %v: got %v, %v", want, got.T.Time(), err)
		}
	}
	// A record written with RFC 3339 text times still reads.
	old := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	var got struct {
		T nanoTime `cbor:"1,keyasint"`
	}
	if err := decode(encode(&struct {
		T time.Time `cbor:"1,keyasint"`
	}{old}), &got); err != nil || !got.T.Time().Equal(old) {
		t.Fatalf("text time: got %v, %v", got.T.Time(), err)
	}
}
