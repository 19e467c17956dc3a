package server

import (
	"encoding/base64"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// FuzzDevicesCursor: a cursor is untrusted input. Whatever devicesQuery
// accepts is the canonical base64url of a ledger position the store can
// give (8 bytes of time and a canonical session id), never anything else.
func FuzzDevicesCursor(f *testing.F) {
	enc := base64.RawURLEncoding.EncodeToString
	for _, seed := range []string{
		enc(append(make([]byte, 8), "0b5f2a9e-7c1d-4e8a-b3f6-9d2c4e6a8b11"...)),
		enc(append(make([]byte, 8), "0B5F2A9E-7C1D-4E8A-B3F6-9D2C4E6A8B11"...)),
		enc(make([]byte, 44)),
		enc(append(make([]byte, 8), "0b5f2a9e-7c1d-4e8a-b3f6-9d2c4e6a8b11"...)) + "==",
		"",
		"!!!!",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, cursor string) {
		r := httptest.NewRequest("GET", "/v1/auth/devices?cursor="+url.QueryEscape(cursor), nil)
		after, limit, err := devicesQuery(r)
		if err != nil {
			return
		}
		if limit != devicesDefaultLimit || len(after) != cursorLen || !isCanonicalUUID(string(after[8:])) || enc(after) != cursor {
			t.Fatalf("accepted cursor %q as %q (limit %d)", cursor, after, limit)
		}
		if strings.ContainsAny(cursor, "=+/\n") {
			t.Fatalf("accepted a cursor %q outside unpadded base64url", cursor)
		}
	})
}
