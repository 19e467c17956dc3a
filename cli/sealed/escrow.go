package sealed

import (
	"bytes"
	"crypto/subtle"
	"encoding/binary"
	"errors"

	"golang.org/x/crypto/argon2"
)

// Argon2Params are the Argon2id parameters of an escrow's passphrase slot
// (FORMAT.md §5.1). They are stored in the escrow, so they can be raised
// later and an escrow opens with the parameters it was made with.
type Argon2Params struct {
	Time      uint32 // passes, t
	MemoryKiB uint32 // memory, m, in KiB
	Threads   uint8  // lanes, p
}

// DefaultArgon2 are the parameters NewEscrow is meant to be given: RFC 9106
// §4's second recommended option (t=3, 64 MiB, p=4).
var DefaultArgon2 = Argon2Params{Time: 3, MemoryKiB: 64 << 10, Threads: 4}

// The floor NewEscrow enforces, and the ceiling OpenEscrow enforces (so a
// forged escrow cannot make a client spend unbounded memory or time).
var (
	minArgon2 = Argon2Params{Time: 3, MemoryKiB: 64 << 10, Threads: 1}
	maxArgon2 = Argon2Params{Time: 64, MemoryKiB: 4 << 20, Threads: 255}
)

// allowWeak lets tests create escrows and wrapped secrets with parameters
// below the floor; only export_test.go sets it.
var allowWeak = false

const (
	escrowHeaderSize = 31
	escrowSlotSize   = KeySize + nonceSize + KeySize + tagSize
	// EscrowSize is the size of every version-1 escrow.
	EscrowSize  = escrowHeaderSize + 3*escrowSlotSize
	kdfArgon2id = 1
)

var escrowMagic = [4]byte{'S', 'B', 'X', 'E'}

// Escrow slot names, appended to the header to form each slot's AAD.
const (
	slotPassphrase = "passphrase"
	slotRecovery   = "recovery"
	slotIdentity   = "identity"
)

// AccountSecrets are what an escrow holds: the master key and the seed of
// the account's hybrid identity key (FORMAT.md §3, §8).
type AccountSecrets struct {
	Master   MasterKey
	Identity IdentitySeed
}

// NewEscrow seals s as the account's escrow blob (FORMAT.md §5): the master
// key under a key derived from passphrase with Argon2id(params), and under
// recovery; the identity seed under the master key. The passphrase is the
// account's encryption passphrase, never its sign-in password, which the
// server sees at every sign-in. Parameters below the
// floor (t 3, 64 MiB, p 1) are ErrWeakParams.
func NewEscrow(s AccountSecrets, passphrase string, recovery RecoveryKey, params Argon2Params) ([]byte, error) {
	salt := randomSalt()
	var nonces [3][nonceSize]byte
	for i := range nonces {
		nonces[i] = randomNonce()
	}
	return newEscrow(s, passphrase, recovery, params, salt, nonces)
}

func newEscrow(s AccountSecrets, passphrase string, recovery RecoveryKey, p Argon2Params, salt [16]byte, nonces [3][nonceSize]byte) ([]byte, error) {
	if !allowWeak && (p.Time < minArgon2.Time || p.MemoryKiB < minArgon2.MemoryKiB || p.Threads < minArgon2.Threads) {
		return nil, ErrWeakParams
	}
	if err := p.check(); err != nil {
		return nil, err
	}
	b := make([]byte, 0, EscrowSize)
	b = append(b, escrowMagic[:]...)
	b = append(b, 1, kdfArgon2id)
	b = binary.BigEndian.AppendUint32(b, p.Time)
	b = binary.BigEndian.AppendUint32(b, p.MemoryKiB)
	b = append(b, p.Threads)
	b = append(b, salt[:]...)
	hdr := b[:escrowHeaderSize:escrowHeaderSize]
	b = sealSlot(b, argonKEK(passphrase, salt[:], p), hdr, slotPassphrase, nonces[0], s.Master)
	b = sealSlot(b, recoveryKEK(recovery, salt[:]), hdr, slotRecovery, nonces[1], s.Master)
	b = sealSlot(b, derive(s.Master[:], nil, infoIdentityWrap), hdr, slotIdentity, nonces[2], s.Identity)
	return b, nil
}

// ReplacePassphrase returns escrow b with its passphrase slot sealed again
// under passphrase (a fresh nonce; the same salt and Argon2id parameters),
// and its recovery and identity slots as they are (FORMAT.md §5.1): the
// recovery key is kept nowhere, so its slot cannot be sealed anew, and it
// still opens. s are the secrets b holds, opened by the caller.
func ReplacePassphrase(b []byte, s AccountSecrets, passphrase string) ([]byte, error) {
	info, err := ParseEscrow(b)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, EscrowSize)
	out = append(out, b[:escrowHeaderSize]...)
	hdr := out[:escrowHeaderSize:escrowHeaderSize]
	out = sealSlot(out, argonKEK(passphrase, info.Salt[:], info.Argon2), hdr, slotPassphrase, randomNonce(), s.Master)
	return append(out, b[escrowHeaderSize+escrowSlotSize:]...), nil
}

func (p Argon2Params) check() error {
	if p.Time < 1 || p.Time > maxArgon2.Time || p.Threads < 1 ||
		p.MemoryKiB < 8*uint32(p.Threads) || p.MemoryKiB > maxArgon2.MemoryKiB {
		return malformed("escrow Argon2id parameters t=%d m=%d p=%d out of range", p.Time, p.MemoryKiB, p.Threads)
	}
	return nil
}

func argonKEK(passphrase string, salt []byte, p Argon2Params) [KeySize]byte {
	return [KeySize]byte(argon2.IDKey([]byte(passphrase), salt, p.Time, p.MemoryKiB, p.Threads, KeySize))
}

func recoveryKEK(k RecoveryKey, salt []byte) [KeySize]byte {
	return derive(k[:], salt, infoRecovery)
}

// A slot commits to its key (FORMAT.md §5): the AES key and a 32-byte
// commitment are both derived from the slot's KEK, and the commitment is
// stored. AES-GCM alone is not key-committing: whoever writes an escrow
// could make one ciphertext open under many guessed passphrases and learn,
// from whether a client opens it, which group the passphrase is in.
func slotKeys(kek [KeySize]byte) (enc, commit [KeySize]byte) {
	return derive(kek[:], nil, infoSlotKey), derive(kek[:], nil, infoSlotCommit)
}

func sealSlot[K ~[KeySize]byte](b []byte, kek [KeySize]byte, hdr []byte, slot string, nonce [nonceSize]byte, key K) []byte {
	enc, commit := slotKeys(kek)
	b = append(b, commit[:]...)
	b = append(b, nonce[:]...)
	return newGCM(enc).Seal(b, nonce[:], key[:], append(hdr, slot...))
}

func openSlot(kek [KeySize]byte, hdr, slotBytes []byte, slot string) ([KeySize]byte, error) {
	enc, commit := slotKeys(kek)
	if subtle.ConstantTimeCompare(commit[:], slotBytes[:KeySize]) != 1 {
		return [KeySize]byte{}, ErrAuth
	}
	rest := slotBytes[KeySize:]
	pt, err := newGCM(enc).Open(nil, rest[:nonceSize], rest[nonceSize:], append(hdr, slot...))
	if err != nil {
		return [KeySize]byte{}, ErrAuth
	}
	return [KeySize]byte(pt), nil
}

// EscrowInfo is what an escrow's header says, read without any key.
type EscrowInfo struct {
	Argon2 Argon2Params
	Salt   [16]byte
}

// ParseEscrow checks an escrow's layout and returns its header. It is the
// parser of untrusted escrow bytes that the Open functions run first.
func ParseEscrow(b []byte) (EscrowInfo, error) {
	if err := checkHeader(b, escrowMagic, "escrow"); err != nil {
		return EscrowInfo{}, err
	}
	if len(b) != EscrowSize {
		return EscrowInfo{}, malformed("escrow is %d bytes, version 1 has %d", len(b), EscrowSize)
	}
	if b[5] != kdfArgon2id {
		return EscrowInfo{}, malformed("escrow passphrase KDF %d unknown", b[5])
	}
	info := EscrowInfo{Argon2: Argon2Params{
		Time:      binary.BigEndian.Uint32(b[6:10]),
		MemoryKiB: binary.BigEndian.Uint32(b[10:14]),
		Threads:   b[14],
	}, Salt: [16]byte(b[15:31])}
	return info, info.Argon2.check()
}

// OpenEscrowWithPassphrase opens an escrow with the encryption passphrase.
func OpenEscrowWithPassphrase(b []byte, passphrase string) (AccountSecrets, error) {
	info, err := ParseEscrow(b)
	if err != nil {
		return AccountSecrets{}, err
	}
	if !HasPassphraseSlot(b) {
		return AccountSecrets{}, ErrNoPassphraseSlot
	}
	return openEscrow(b, argonKEK(passphrase, info.Salt[:], info.Argon2), escrowHeaderSize, slotPassphrase)
}

// OpenEscrowWithRecoveryKey opens an escrow with the recovery key.
func OpenEscrowWithRecoveryKey(b []byte, k RecoveryKey) (AccountSecrets, error) {
	info, err := ParseEscrow(b)
	if err != nil {
		return AccountSecrets{}, err
	}
	return openEscrow(b, recoveryKEK(k, info.Salt[:]), escrowHeaderSize+escrowSlotSize, slotRecovery)
}

func openEscrow(b []byte, kek [KeySize]byte, at int, slot string) (AccountSecrets, error) {
	hdr := b[:escrowHeaderSize:escrowHeaderSize]
	mk, err := openSlot(kek, hdr, b[at:at+escrowSlotSize], slot)
	if err != nil {
		return AccountSecrets{}, err
	}
	at = escrowHeaderSize + 2*escrowSlotSize
	id, err := openSlot(derive(mk[:], nil, infoIdentityWrap), hdr, b[at:at+escrowSlotSize], slotIdentity)
	if err != nil {
		return AccountSecrets{}, err
	}
	return AccountSecrets{Master: MasterKey(mk), Identity: IdentitySeed(id)}, nil
}

// ErrNoPassphraseSlot is an escrow that keeps the master key under the
// recovery key only (FORMAT.md §5.4): no passphrase opens it.
var ErrNoPassphraseSlot = errors.New("sealed: the escrow keeps the keys under the recovery key only; no password opens it")

// HasPassphraseSlot reports whether escrow b (already parsed) holds the
// master key under a passphrase: a slot of 92 zero bytes is none (FORMAT.md
// §5.4).
func HasPassphraseSlot(b []byte) bool {
	if len(b) != EscrowSize {
		return false
	}
	for _, c := range b[escrowHeaderSize : escrowHeaderSize+escrowSlotSize] {
		if c != 0 {
			return true
		}
	}
	return false
}

// RemovePassphrase returns escrow b with its passphrase slot replaced by
// zeros (FORMAT.md §5.4): the header, the recovery and the identity slots
// stay byte for byte, so the recovery key still opens it, and whoever holds
// the escrow has no password to guess. ReplacePassphrase puts one back.
func RemovePassphrase(b []byte) ([]byte, error) {
	if _, err := ParseEscrow(b); err != nil {
		return nil, err
	}
	out := bytes.Clone(b)
	clear(out[escrowHeaderSize : escrowHeaderSize+escrowSlotSize])
	return out, nil
}
