// Package sealed is the client's sealed format: every byte a sealbox client
// writes for the server to keep (escrow, wrapped keys, blobs, metadata,
// manifests, share material, device seals). FORMAT.md beside this file
// specifies it byte for byte; the vectors under testdata/sealed/ at the
// repository root are checked by this package's tests.
//
// Symmetric cryptography is AES-256-GCM and HKDF-SHA256 only, so a browser
// opens share material with WebCrypto alone. Argon2id derives the key of the
// escrow's passphrase slot, PBKDF2-SHA256 that of a share passphrase, and HPKE
// (DHKEM(X25519), HKDF-SHA256, AES-256-GCM) seals a master key to a device.
//
// Blobs are sealed as a STREAM of 64 KiB chunks (Writer, Reader), and any
// byte range of the plaintext is read from the chunks that cover it
// (ReaderAt, CiphertextSpan).
package sealed
