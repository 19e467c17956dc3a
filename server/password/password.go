// Package password hashes and verifies account passwords with argon2id.
package password

import (
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/crypto/argon2"
)

// Params are argon2id's cost parameters. They are stored inside every
// hash, so raising the defaults later keeps old hashes verifiable.
type Params struct {
	Time      uint32
	MemoryKiB uint32
	Threads   uint8
}

// Default is server/PROTOCOL.md §2's t=2, m=64 MiB, p=2.
var Default = Params{Time: 2, MemoryKiB: 64 << 10, Threads: 2}

const (
	argonSaltLen = 16
	argonKeyLen  = 32
)

// Hasher hashes and verifies passwords. At most GOMAXPROCS argon2id
// computations run at once: a login flood queues on the semaphore instead of
// allocating 64 MiB per request.
type Hasher struct {
	params Params
	rand   io.Reader
	sem    chan struct{}

	dummyOnce sync.Once
	dummy     string
}

// NewHasher makes hashes with p and salts from rand. It is safe for
// concurrent use.
func NewHasher(p Params, rand io.Reader) *Hasher {
	return &Hasher{params: p, rand: rand, sem: make(chan struct{}, runtime.GOMAXPROCS(0))}
}

func (h *Hasher) key(password string, salt []byte, p Params) []byte {
	h.sem <- struct{}{}
	defer func() { <-h.sem }()
	return argon2.IDKey([]byte(password), salt, p.Time, p.MemoryKiB, p.Threads, argonKeyLen)
}

// Hash returns the PHC-format argon2id hash of password.
func (h *Hasher) Hash(password string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := io.ReadFull(h.rand, salt); err != nil {
		return "", err
	}
	p := h.params
	k := h.key(password, salt, p)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, p.MemoryKiB, p.Time, p.Threads, enc.EncodeToString(salt), enc.EncodeToString(k)), nil
}

// Verify reports whether password matches encoded. An empty encoded hash
// (no such account) is verified against a dummy hash made with the current
// parameters, so an unknown address costs the same work as a known one, and
// always fails.
func (h *Hasher) Verify(encoded, password string) (bool, error) {
	unknown := encoded == ""
	if unknown {
		h.dummyOnce.Do(func() { h.dummy, _ = h.Hash("sealbox dummy password") })
		encoded = h.dummy
	}
	p, salt, want, err := parseArgon2(encoded)
	if err != nil {
		return false, err
	}
	got := h.key(password, salt, p)
	return subtle.ConstantTimeCompare(got, want) == 1 && !unknown, nil
}

func parseArgon2(encoded string) (Params, []byte, []byte, error) {
	var p Params
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" || parts[2] != fmt.Sprintf("v=%d", argon2.Version) {
		return p, nil, nil, fmt.Errorf("unsupported password hash format")
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.MemoryKiB, &p.Time, &p.Threads); err != nil {
		return p, nil, nil, fmt.Errorf("password hash parameters: %w", err)
	}
	salt, err := base64.RawStdEncoding.DecodeString(parts[4])
	if err != nil {
		return p, nil, nil, fmt.Errorf("password hash salt: %w", err)
	}
	key, err := base64.RawStdEncoding.DecodeString(parts[5])
	if err != nil {
		return p, nil, nil, fmt.Errorf("password hash key: %w", err)
	}
	return p, salt, key, nil
}
