// Package secrets is the server's work with server.key, the one secret that
// never enters the database: TOTP secrets sealed at rest, the TOTP code
// check, and enrollment fallback codes (their draw and their keyed lookup
// form). The key's length is checked once, by New.
package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/hotp"

	"sealbox/server/ids"
)

// KeyLen is the length of server.key: an AES-256 key.
const KeyLen = 32

// TOTP as server/PROTOCOL.md §3 fixes it: HMAC-SHA-1, six digits, 30-second
// steps, one step of skew either way.
const (
	TOTPPeriod = 30
	totpSkew   = 1
)

// TOTPOpts are the code parameters, for provisioning URIs and checks alike.
var TOTPOpts = hotp.ValidateOpts{Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1}

// Keeper holds server.key's uses.
type Keeper struct {
	aead        cipher.AEAD
	fallbackKey []byte
	channelKey  []byte
	rand        io.Reader
}

// New checks key (KeyLen bytes) and derives its uses; rand makes nonces.
func New(key []byte, rand io.Reader) (*Keeper, error) {
	if len(key) != KeyLen {
		return nil, fmt.Errorf("secrets: server.key holds %d bytes, want %d", len(key), KeyLen)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Keeper{aead: aead, fallbackKey: subkey(key, "sealbox/enroll-fallback/v1"),
		channelKey: subkey(key, "sealbox/enroll-channel/v1"), rand: rand}, nil
}

// subkey is HMAC-SHA-256(key, label): one key per use of server.key.
func subkey(key []byte, label string) []byte {
	derive := hmac.New(sha256.New, key)
	derive.Write([]byte(label))
	return derive.Sum(nil)
}

// TOTP secrets are sealed with AES-256-GCM, with a random nonce before the
// ciphertext. The associated data binds a sealed secret to its purpose and
// account, so one copied onto another account's record does not open.
const sealNonceLen = 12

func totpAD(accountID string) []byte {
	return []byte("sealbox/totp-secret/v1\x00" + accountID)
}

// SealTOTP seals the account's TOTP secret for the store.
func (k *Keeper) SealTOTP(accountID string, secret []byte) ([]byte, error) {
	nonce := make([]byte, sealNonceLen, sealNonceLen+len(secret)+k.aead.Overhead())
	if _, err := io.ReadFull(k.rand, nonce); err != nil {
		return nil, err
	}
	return k.aead.Seal(nonce, nonce, secret, totpAD(accountID)), nil
}

// OpenTOTP opens what SealTOTP sealed for the same account.
func (k *Keeper) OpenTOTP(accountID string, sealed []byte) ([]byte, error) {
	if len(sealed) < sealNonceLen {
		return nil, errors.New("secrets: sealed secret too short")
	}
	secret, err := k.aead.Open(nil, sealed[:sealNonceLen], sealed[sealNonceLen:], totpAD(accountID))
	if err != nil {
		return nil, errors.New("secrets: a sealed TOTP secret does not open: server.key differs from the one that sealed it, or the record is corrupt")
	}
	return secret, nil
}

// MatchTOTP returns the time step within the skew of now whose code is
// code. When several match (a one-in-a-million coincidence) the oldest wins,
// so the newer steps stay usable.
func MatchTOTP(secret []byte, code string, now time.Time) (uint64, bool, error) {
	b32 := base32.StdEncoding.EncodeToString(secret)
	current := uint64(now.Unix()) / TOTPPeriod
	for step := current - min(current, totpSkew); step <= current+totpSkew; step++ {
		ok, err := hotp.ValidateCustom(code, step, b32, TOTPOpts)
		if err != nil {
			return 0, false, err
		}
		if ok {
			return step, true, nil
		}
	}
	return 0, false, nil
}

// FallbackDigits is the length of an enrollment fallback code: decimal
// digits a person can type on another device (server/PROTOCOL.md §6).
const FallbackDigits = 12

// fallbackSpace is how many fallback codes there are (10^FallbackDigits);
// fallbackCeiling is the largest multiple of it a 64-bit draw can hold.
const (
	fallbackSpace   = 1_000_000_000_000
	fallbackCeiling = math.MaxUint64 - math.MaxUint64%fallbackSpace
)

// NewFallback draws an enrollment fallback code, FallbackDigits uniformly
// random decimal digits, and returns it with its lookup form (FallbackLookup),
// which is all the store may keep. A 64-bit draw at or above fallbackCeiling
// is drawn again, so the modulo favours no code.
func (k *Keeper) NewFallback() (digits, lookup string) {
	for {
		var b [8]byte
		ids.Fill(k.rand, b[:])
		if v := binary.BigEndian.Uint64(b[:]); v < fallbackCeiling {
			digits = fmt.Sprintf("%0*d", FallbackDigits, v%fallbackSpace)
			return digits, k.FallbackLookup(digits)
		}
	}
}

// FallbackLookup is the form in which a numeric enrollment fallback code
// reaches the store, at issue and at redeem: HMAC-SHA-256 under a key
// derived from server.key. The store keeps only the SHA-256 of every code,
// but 10^12 fallback codes are few enough to hash them all from a stolen
// database copy (minutes on a GPU, within a code's ten minutes); without
// server.key there is nothing to guess against.
func (k *Keeper) FallbackLookup(digits string) string {
	mac := hmac.New(sha256.New, k.fallbackKey)
	mac.Write([]byte(digits))
	return hex.EncodeToString(mac.Sum(nil))
}

// EnrollmentChannel is the 32 random-looking bytes of the relay channel a
// redeemed enrollment code opens, from the SHA-256 of the code's full
// spelling (codeKey, what the store keys the code by): HMAC-SHA-256 under a
// key derived from server.key (server/PROTOCOL.md §17). The redeemer, with
// either spelling, and the issuer, with the full code, reach the same
// channel, and the store, which keeps only hashes, cannot name it.
func (k *Keeper) EnrollmentChannel(codeKey []byte) []byte {
	mac := hmac.New(sha256.New, k.channelKey)
	mac.Write(codeKey)
	return mac.Sum(nil)
}

// Fingerprint is a value that tells one server.key from another without
// revealing it (an HMAC under the key of a fixed label), so the store can
// record which key its secrets are sealed under.
func Fingerprint(key []byte) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("sealbox/server-key-fingerprint/v1"))
	return mac.Sum(nil)
}
