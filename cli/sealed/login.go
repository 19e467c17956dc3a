package sealed

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"

	"golang.org/x/crypto/argon2"
)

// loginArgon2 are the login secret's Argon2id parameters (FORMAT.md §5.3).
// They are fixed by the format, not stored anywhere: a device derives the
// secret before it has signed in, from the email and password alone.
var loginArgon2 = Argon2Params{Time: 3, MemoryKiB: 64 << 10, Threads: 4}

// LoginSecret is what a client sends to the server as the account's
// password (FORMAT.md §5.3): derived from the person's password with
// Argon2id under a salt of the email, so the server never learns the
// password that opens the escrow, and guessing it from what the server
// holds costs an Argon2id per guess, as the escrow does.
func LoginSecret(email, password string) string {
	k := argon2.IDKey([]byte(password), loginSalt(email), loginArgon2.Time, loginArgon2.MemoryKiB, loginArgon2.Threads, KeySize)
	out := derive(k[:], nil, "sealbox/v1/login")
	return "sbx1-" + base64.RawURLEncoding.EncodeToString(out[:])
}

// loginSalt is the first 16 bytes of SHA-256 of the label, a zero byte and
// the email as the server normalises it (trimmed, lower case).
func loginSalt(email string) []byte {
	sum := sha256.Sum256([]byte("sealbox/v1/login-salt\x00" + strings.ToLower(strings.TrimSpace(email))))
	return sum[:16]
}
