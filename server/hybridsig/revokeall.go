package hybridsig

import "github.com/fxamacker/cbor/v2"

// revokeAllPurpose binds a revoke-all proof to this one use and version, so a
// signature made by the identity key for anything else cannot be replayed
// here.
const revokeAllPurpose = "sealbox/revoke-all/v1"

// coreDet encodes core deterministic CBOR (RFC 8949 §4.2.1): shortest-form
// heads, definite lengths, map keys sorted by their encoded bytes.
var coreDet = mustEncMode(cbor.CoreDetEncOptions())

func mustEncMode(opts cbor.EncOptions) cbor.EncMode {
	em, err := opts.EncMode()
	if err != nil {
		panic("hybridsig: invalid CBOR encoding options: " + err.Error())
	}
	return em
}

// RevokeAllSigningBytes returns revoke_all_signing_bytes (server/PROTOCOL.md §4):
// the core deterministic CBOR encoding of the map
//
//	{"purpose": "sealbox/revoke-all/v1", "user_id": userID, "challenge": challenge}
//
// whose keys, sorted by encoded bytes (shorter first), come out in the order
// purpose, user_id, challenge. The result is a pure function of its inputs.
//
// userID and challenge are written as CBOR text without validation, so they
// must be valid UTF-8; the server passes its own minted ids and tokens (ASCII)
// and strings decoded from JSON, which always are.
func RevokeAllSigningBytes(userID, challenge string) []byte {
	b, err := coreDet.Marshal(map[string]string{
		"purpose":   revokeAllPurpose,
		"user_id":   userID,
		"challenge": challenge,
	})
	if err != nil {
		// Encoding a map of strings has no failure case; reaching this is a
		// bug in the encoder, not bad input.
		panic("hybridsig: encoding revoke-all signing bytes: " + err.Error())
	}
	return b
}
