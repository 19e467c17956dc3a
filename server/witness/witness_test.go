package witness_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"sealbox/kv/pgtest"
	"strings"
	"testing"
	"time"

	"filippo.io/torchwood"

	"sealbox/kv"
	"sealbox/kv/kvtest"
	"sealbox/server/translog"
	"sealbox/server/witness"
)

// TestMain stops the PostgreSQL cluster a test started (SEALBOX_TEST_PG=1).
func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	os.Exit(code)
}

func newLog(t *testing.T, s *kv.Store) *translog.Log {
	t.Helper()
	key, err := translog.NewKey(rand.Reader, "sealbox/worker.example")
	if err != nil {
		t.Fatal(err)
	}
	return translog.New(s, key, 0)
}

// TestOneNodeSigns: of two workers sharing a store, only the lease holder
// works a round; when it stops, the other takes over the next work. A round
// with nothing to do takes no lease (an idle server writes nothing).
func TestOneNodeSigns(t *testing.T) {
	s, _ := kvtest.MustOpenStore(t)
	log := newLog(t, s)
	a := witness.New(s, log, witness.Options{Interval: time.Hour})
	b := witness.New(s, log, witness.Options{Interval: time.Hour})
	if !a.Round(t.Context()) || b.Round(t.Context()) {
		t.Fatal("both workers, or neither, held the lease")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	a.Run(ctx) // one round, then the lease is released
	if b.Round(t.Context()) {
		t.Fatal("a round with nothing to sign took the lease")
	}
	if held, err := s.TryLease("witness", "probe", time.Minute); err != nil || !held {
		t.Fatalf("the lease after an idle round: held %v, %v; want it free", held, err)
	}
	if err := s.ReleaseLease("witness", "probe"); err != nil {
		t.Fatal(err)
	}
	if err := s.PublishDirectory("acct-1", &kv.Directory{Version: 1, Bytes: []byte("d"), IdentityKey: []byte("k")}, kv.PublishLimit{}); err != nil {
		t.Fatal(err)
	}
	if !b.Round(t.Context()) {
		t.Fatal("the second worker did not take over once the first stopped and the tree grew")
	}
}

// TestParse: a witness is VKEY=URL, the key a C2SP cosignature verifier key
// and the URL http(s).
func TestParse(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, err := torchwood.NewCosignatureSigner("witness.example/w", priv)
	if err != nil {
		t.Fatal(err)
	}
	vkey := signer.Verifier().String()
	w, err := witness.Parse(vkey + "=https://witness.example/w/")
	if err != nil || w.URL != "https://witness.example/w" || w.Name() != "witness.example/w" {
		t.Fatalf("%+v, %v", w, err)
	}
	logVKey := "sealbox/x+01234567+AXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX"
	for _, tc := range []struct{ spec, want string }{
		{vkey, "want VKEY=URL"},
		{"nope=http://w", "not a cosignature verifier key"},
		{logVKey + "=http://w", "not a cosignature verifier key"},
		{vkey + "=ftp://w", "not an http(s) URL"},
		{vkey + "=http://", "not an http(s) URL"},
	} {
		if _, err := witness.Parse(tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.spec, err, tc.want)
		}
	}
}
