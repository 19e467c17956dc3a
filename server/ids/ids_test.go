package ids

import (
	"bytes"
	"crypto/rand"
	"regexp"
	"strings"
	"testing"
)

func TestUUIDIsCanonicalVersion4(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		u := UUID(rand.Reader)
		if !re.MatchString(u) || seen[u] {
			t.Fatalf("bad or repeated UUID %q", u)
		}
		seen[u] = true
	}
}

func TestTokenHas256Bits(t *testing.T) {
	tok := Token(bytes.NewReader(bytes.Repeat([]byte{0xff}, 32)), "sbx_at_")
	if want := "sbx_at_" + strings.Repeat("_", 42) + "8"; tok != want {
		t.Fatalf("got %q, want %q", tok, want)
	}
}

func TestFailingRandomnessPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("a short read did not panic")
		}
	}()
	Token(bytes.NewReader(nil), "x")
}
