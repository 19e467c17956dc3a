package sealed

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Linking a second device (FORMAT.md §13): the messages two devices
// exchange through the enrollment relay, and the short authentication
// string each shows so that a person can tell that no one stood between
// them.

// Link message types (FORMAT.md §13.1).
const (
	LinkTypeCommit = "commit"
	LinkTypeKey    = "key"
	LinkTypeReveal = "reveal"
	LinkTypeKeys   = "keys"
	LinkTypeDone   = "done"
	LinkTypeAbort  = "abort"
)

// Abort reasons (FORMAT.md §13.1).
const (
	AbortMismatch = "mismatch"
	AbortFailed   = "failed"
)

// LinkMessage is one relay payload of the link exchange. Which fields are
// set depends on Type; ParseLinkMessage checks each against it.
type LinkMessage struct {
	V    int    `json:"v"`
	Type string `json:"type"`
	// Commit (commit): LinkCommitment of the new device's public key.
	Commit []byte `json:"-"`
	// PublicKey (key, reveal): a 32-byte X25519 public key.
	PublicKey []byte `json:"-"`
	// Sealed (keys): the master key sealed to the new device (§10).
	Sealed []byte `json:"-"`
	// Reason (abort): AbortMismatch or AbortFailed.
	Reason string `json:"-"`
}

// linkWire is the JSON form: byte strings as unpadded base64url.
type linkWire struct {
	V         int     `json:"v"`
	Type      string  `json:"type"`
	Commit    *string `json:"commit,omitempty"`
	PublicKey *string `json:"public_key,omitempty"`
	Sealed    *string `json:"sealed,omitempty"`
	Reason    *string `json:"reason,omitempty"`
}

// maxLinkMessage bounds a link payload: the largest (keys) is under 200
// bytes.
const maxLinkMessage = 1024

func b64(b []byte) *string {
	s := base64.RawURLEncoding.EncodeToString(b)
	return &s
}

// Marshal returns the payload text of m (FORMAT.md §13.1).
func (m LinkMessage) Marshal() string {
	w := linkWire{V: 1, Type: m.Type}
	switch m.Type {
	case LinkTypeCommit:
		w.Commit = b64(m.Commit)
	case LinkTypeKey, LinkTypeReveal:
		w.PublicKey = b64(m.PublicKey)
	case LinkTypeKeys:
		w.Sealed = b64(m.Sealed)
	case LinkTypeAbort:
		w.Reason = &m.Reason
	}
	b, err := json.Marshal(w)
	if err != nil {
		panic("sealed: link message: " + err.Error())
	}
	return string(b)
}

// ParseLinkMessage reads one relay payload of the link exchange. Anything
// but one JSON object of a known type with exactly its fields, each of its
// size, is ErrMalformed; a version other than 1 is a *VersionError.
func ParseLinkMessage(payload string) (LinkMessage, error) {
	if len(payload) > maxLinkMessage {
		return LinkMessage{}, malformed("link message of %d bytes", len(payload))
	}
	dec := json.NewDecoder(strings.NewReader(payload))
	dec.DisallowUnknownFields()
	var w linkWire
	if err := dec.Decode(&w); err != nil {
		return LinkMessage{}, malformed("link message: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return LinkMessage{}, malformed("link message: data after the object")
	}
	if w.V != 1 {
		return LinkMessage{}, &VersionError{Object: "link message", Version: w.V}
	}
	m := LinkMessage{V: 1, Type: w.Type}
	field := func(s *string, name string, size int) ([]byte, error) {
		if s == nil {
			return nil, malformed("link message %s without %s", w.Type, name)
		}
		b, err := base64.RawURLEncoding.Strict().DecodeString(*s)
		if err != nil || len(b) != size || base64.RawURLEncoding.EncodeToString(b) != *s {
			return nil, malformed("link message %s: %s is not %d bytes of unpadded base64url", w.Type, name, size)
		}
		return b, nil
	}
	// want lists the fields the type carries; any other is refused.
	var err error
	want := map[string]bool{}
	switch w.Type {
	case LinkTypeCommit:
		want["commit"] = true
		m.Commit, err = field(w.Commit, "commit", sha256.Size)
	case LinkTypeKey, LinkTypeReveal:
		want["public_key"] = true
		m.PublicKey, err = field(w.PublicKey, "public_key", 32)
	case LinkTypeKeys:
		want["sealed"] = true
		m.Sealed, err = field(w.Sealed, "sealed", DeviceSealSize)
	case LinkTypeAbort:
		want["reason"] = true
		if w.Reason == nil || (*w.Reason != AbortMismatch && *w.Reason != AbortFailed) {
			err = malformed("link message abort: reason is not %q or %q", AbortMismatch, AbortFailed)
		} else {
			m.Reason = *w.Reason
		}
	case LinkTypeDone:
	default:
		return LinkMessage{}, malformed("link message of unknown type %q", w.Type)
	}
	if err != nil {
		return LinkMessage{}, err
	}
	for name, set := range map[string]bool{"commit": w.Commit != nil, "public_key": w.PublicKey != nil, "sealed": w.Sealed != nil, "reason": w.Reason != nil} {
		if set && !want[name] {
			return LinkMessage{}, malformed("link message %s with %s", w.Type, name)
		}
	}
	// One spelling per message: JSON's other spellings (white space, key
	// order or case, escapes, a key twice) are refused, so that every
	// reader sees the message the same way.
	if m.Marshal() != payload {
		return LinkMessage{}, malformed("link message %s is not in its canonical form", w.Type)
	}
	return m, nil
}

// LinkCommitment is what the new device sends before its public key:
// SHA-256("sealbox/v1/link:commit" || 0x00 || public key).
func LinkCommitment(publicKey []byte) []byte {
	h := sha256.New()
	h.Write([]byte("sealbox/v1/link:commit\x00"))
	h.Write(publicKey)
	return h.Sum(nil)
}

// CheckLinkCommitment reports whether publicKey is the one commit named.
func CheckLinkCommitment(commit, publicKey []byte) bool {
	return subtle.ConstantTimeCompare(commit, LinkCommitment(publicKey)) == 1
}

// LinkSASDigits is the length of the comparison string.
const LinkSASDigits = 6

// LinkSAS is the short authentication string both devices show: the first
// four bytes of SHA-256("sealbox/v1/link:sas" || 0x00 || new device's
// public key || old device's public key), big-endian, modulo 10^6, as six
// decimal digits with leading zeros.
func LinkSAS(newDevice, oldDevice []byte) string {
	h := sha256.New()
	h.Write([]byte("sealbox/v1/link:sas\x00"))
	h.Write(newDevice)
	h.Write(oldDevice)
	v := binary.BigEndian.Uint32(h.Sum(nil)[:4])
	return fmt.Sprintf("%0*d", LinkSASDigits, v%1_000_000)
}

// SameLinkSAS reports whether a comparison string a person typed (spaces
// and dashes allowed between the digits) is sas.
func SameLinkSAS(typed, sas string) bool {
	var b bytes.Buffer
	for _, r := range typed {
		switch {
		case r >= '0' && r <= '9':
			b.WriteRune(r)
		case r == ' ' || r == '-' || r == '\t':
		default:
			return false
		}
	}
	return subtle.ConstantTimeCompare(b.Bytes(), []byte(sas)) == 1
}

// OpenEscrowIdentity opens the escrow's identity slot with the master key,
// as a device that received the master key over a link does: it fails
// (ErrAuth) when mk is not the account's, so a master key from anyone but
// a device of the account is refused.
func OpenEscrowIdentity(b []byte, mk MasterKey) (IdentitySeed, error) {
	if _, err := ParseEscrow(b); err != nil {
		return IdentitySeed{}, err
	}
	hdr := b[:escrowHeaderSize:escrowHeaderSize]
	at := escrowHeaderSize + 2*escrowSlotSize
	id, err := openSlot(derive(mk[:], nil, infoIdentityWrap), hdr, b[at:at+escrowSlotSize], slotIdentity)
	if err != nil {
		return IdentitySeed{}, err
	}
	return IdentitySeed(id), nil
}
