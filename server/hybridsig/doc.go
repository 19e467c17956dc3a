// Package hybridsig verifies sealbox's hybrid identity signatures: an Ed25519
// signature and an ML-DSA-65 (FIPS 204) signature over the same message, by a
// key made of one public key of each kind. A signature is accepted only when
// both halves verify, so it stays unforgeable as long as either algorithm
// holds.
//
// Wire layouts (server/PROTOCOL.md §4), both "classical then post-quantum":
//
//	public key: Ed25519 public key (32) || ML-DSA-65 public key (1952) = 1984 bytes
//	signature:  Ed25519 signature (64)  || ML-DSA-65 signature (3309)  = 3373 bytes
//
// Both travel as standard base64 with padding. ML-DSA-65 is used with the
// empty context string.
//
// The server only verifies; it never holds an identity private key. DevKey
// (devkey.go) derives one from a seed, for tests and for `sealbox dev`, the
// client developers' tool.
package hybridsig
