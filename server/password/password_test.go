package password

import (
	"crypto/rand"
	"strings"
	"testing"
)

var cheap = Params{Time: 1, MemoryKiB: 64, Threads: 1}

func TestHashVerify(t *testing.T) {
	h := NewHasher(cheap, rand.Reader)
	enc, err := h.Hash("correct horse")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(enc, "$argon2id$v=19$m=64,t=1,p=1$") {
		t.Fatalf("hash does not carry its parameters: %s", enc)
	}
	for pw, want := range map[string]bool{"correct horse": true, "correct horsE": false, "": false} {
		if got, err := h.Verify(enc, pw); err != nil || got != want {
			t.Errorf("Verify(%q): got %v, %v; want %v", pw, got, err, want)
		}
	}
}

// A hash made with other parameters still verifies: raising the defaults
// must not lock anyone out.
func TestVerifyUsesStoredParameters(t *testing.T) {
	old, _ := NewHasher(Params{Time: 2, MemoryKiB: 128, Threads: 2}, rand.Reader).Hash("pw")
	if ok, err := NewHasher(cheap, rand.Reader).Verify(old, "pw"); !ok || err != nil {
		t.Fatalf("got %v, %v", ok, err)
	}
}

func TestUnknownAccountNeverVerifies(t *testing.T) {
	h := NewHasher(cheap, rand.Reader)
	if ok, err := h.Verify("", "sealbox dummy password"); ok || err != nil {
		t.Fatalf("the dummy hash verified: %v %v", ok, err)
	}
}

func TestMalformedHashIsAnError(t *testing.T) {
	h := NewHasher(cheap, rand.Reader)
	for _, enc := range []string{"plain", "$argon2i$v=19$m=64,t=1,p=1$AAAA$AAAA", "$argon2id$v=19$m=x$AAAA$AAAA", "$argon2id$v=19$m=64,t=1,p=1$!!$AAAA"} {
		if _, err := h.Verify(enc, "pw"); err == nil {
			t.Errorf("%q: no error", enc)
		}
	}
}
