package server

import (
	"testing"

	"sealbox/kv/fault"
)

// FuzzUpgradeIntent: the intent decoder never panics; every refusal is 400
// error.request.malformed; an accepted body is well-formed CBOR, a map at
// the top level, naming a canonical UUID and a protocol date.
func FuzzUpgradeIntent(f *testing.F) {
	for _, seed := range [][]byte{
		[]byte("\xa2\x69intent_id\x78\x24" + "1a7e0000-0000-4000-8000-00000000000a" + "\x73to_protocol_version\x6a2026-09-01"),
		[]byte("\xa3\x69intent_id\x78\x24" + "1a7e0000-0000-4000-8000-00000000000a" + "\x73to_protocol_version\x6a2026-09-01\x01\x82\x01\x02"),
		[]byte("\xa2\x69intent_id\x07\x73to_protocol_version\x6a2026-09-01"),
		[]byte("\xbf\x69intent_id\x78\x24" + "1A7E0000-0000-4000-8000-00000000000A" + "\x73to_protocol_version\x6a2026-09-01\xff"),
		{0x80}, {0xa0}, {0xff}, {}, []byte("\x9f\x9f\x9f\x9f\x9f"),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		id, to, err := decodeUpgradeIntent(body)
		if err != nil {
			if code := fault.ErrorCode(err); code != fault.ECodeMalformed {
				t.Fatalf("refusal with code %q (%v)", code, err)
			}
			return
		}
		if !isCanonicalUUID(id) || !isProtocolDate(to) {
			t.Fatalf("accepted intent_id %q, to_protocol_version %q", id, to)
		}
		if err := upgradeCBOR.Wellformed(body); err != nil {
			t.Fatalf("accepted a body that is not well-formed: %v", err)
		}
		if body[0]>>5 != 5 {
			t.Fatalf("accepted a top level that is not a map: %x", body)
		}
	})
}
