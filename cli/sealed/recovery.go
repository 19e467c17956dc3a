package sealed

import (
	"crypto/rand"
	"crypto/sha256"
	"strings"
)

// RecoveryKey is the secret shown once at sign-up (FORMAT.md §5.2): 16
// random bytes, written as 32 Crockford base32 characters (the 16 bytes and
// 4 check bytes) in 8 groups of 4.
type RecoveryKey [16]byte

const (
	crockford       = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	recoveryCheck   = "sealbox/v1/recovery-check"
	recoveryChars   = 32
	recoveryPayload = 20 // 16 secret bytes + 4 check bytes
)

// NewRecoveryKey returns a new random recovery key.
func NewRecoveryKey() RecoveryKey {
	var k RecoveryKey
	rand.Read(k[:])
	return k
}

func (k RecoveryKey) check() [4]byte {
	sum := sha256.Sum256(append([]byte(recoveryCheck), k[:]...))
	return [4]byte(sum[:4])
}

// String writes the key for a person: "XXXX-XXXX-XXXX-XXXX-XXXX-XXXX-XXXX-XXXX".
func (k RecoveryKey) String() string {
	c := k.check()
	data := append(k[:], c[:]...)
	var b strings.Builder
	for i := range recoveryChars {
		if i > 0 && i%4 == 0 {
			b.WriteByte('-')
		}
		b.WriteByte(crockford[bits5(data, i)])
	}
	return b.String()
}

// bits5 returns the i-th 5-bit group of data, most significant bit first.
func bits5(data []byte, i int) byte {
	bit := i * 5
	v := uint16(data[bit/8]) << 8
	if bit/8+1 < len(data) {
		v |= uint16(data[bit/8+1])
	}
	return byte(v>>(11-bit%8)) & 31
}

// ParseRecoveryKey reads a recovery key as a person typed it: case does not
// matter, hyphens and spaces are skipped, O reads as 0 and I and L as 1. A
// wrong length, a character outside the alphabet or check characters that do
// not match is ErrRecoveryKey.
func ParseRecoveryKey(s string) (RecoveryKey, error) {
	var data [recoveryPayload]byte
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '-' || c == ' ':
			continue
		case c >= 'a' && c <= 'z':
			c -= 'a' - 'A'
		}
		switch c {
		case 'O':
			c = '0'
		case 'I', 'L':
			c = '1'
		}
		v := strings.IndexByte(crockford, c)
		if v < 0 || n == recoveryChars {
			return RecoveryKey{}, ErrRecoveryKey
		}
		bit := n * 5
		w := uint16(v) << (11 - bit%8)
		data[bit/8] |= byte(w >> 8)
		if bit/8+1 < len(data) {
			data[bit/8+1] |= byte(w)
		}
		n++
	}
	if n != recoveryChars {
		return RecoveryKey{}, ErrRecoveryKey
	}
	k := RecoveryKey(data[:16])
	if k.check() != [4]byte(data[16:]) {
		return RecoveryKey{}, ErrRecoveryKey
	}
	return k, nil
}
