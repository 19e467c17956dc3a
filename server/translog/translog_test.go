package translog_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"path/filepath"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"sealbox/kv"
	"sealbox/kv/kvtest"
	"sealbox/server/translog"
)

func openStore(t *testing.T) *kv.Store {
	t.Helper()
	s, err := kvtest.Open(filepath.Join(t.TempDir(), "sealbox.db"), kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newKey(t *testing.T) translog.Key {
	t.Helper()
	key, err := translog.NewKey(rand.Reader, "sealbox/log.example")
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func publish(t *testing.T, s *kv.Store, account string) {
	t.Helper()
	if err := s.PublishDirectory(account, &kv.Directory{Version: 1, Bytes: []byte("d"), IdentityKey: []byte("k")}, kv.PublishLimit{}); err != nil {
		t.Fatal(err)
	}
}

// TestSignOncePerSize: a checkpoint is signed when the tree grew, and the
// newest is returned unchanged while it has not.
func TestSignOncePerSize(t *testing.T) {
	s := openStore(t)
	log := translog.New(s, newKey(t), 0)
	first, err := log.Sign()
	if err != nil || first.Size != 0 {
		t.Fatalf("the empty tree: %+v, %v", first, err)
	}
	publish(t, s, "acct-1")
	grown, err := log.Sign()
	if err != nil || grown.Size != 1 || !bytes.Contains(grown.Note, []byte("sealbox/log.example\n1\n")) {
		t.Fatalf("after a publish: %+v, %v", grown, err)
	}
	again, err := log.Sign()
	if err != nil || !bytes.Equal(again.Note, grown.Note) {
		t.Fatalf("signed again at the same size: %q, was %q (%v)", again.Note, grown.Note, err)
	}
}

// TestSignedBytes: before the first signature there is no checkpoint to
// hand out; then Signed serves the newest checkpoint that reached the
// quorum, with its cosignature lines, Latest the newest signed one with the
// lines it has so far; a checkpoint verifies under the key's verifier key,
// which is handed out as one line.
func TestSignedBytes(t *testing.T) {
	s, key := openStore(t), newKey(t)
	log := translog.New(s, key, 1)
	if _, err := log.Signed(); !errors.Is(err, translog.ErrNoCheckpoint) {
		t.Fatalf("Signed before any signature: %v, want ErrNoCheckpoint", err)
	}
	if _, err := log.Latest(); !errors.Is(err, translog.ErrNoCheckpoint) {
		t.Fatalf("Latest before any signature: %v, want ErrNoCheckpoint", err)
	}
	publish(t, s, "acct-1")
	small, err := log.Sign()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := log.Signed(); err != nil || !bytes.Equal(got, small.Note) {
		t.Fatalf("Signed with nothing witnessed: %q, %v; want the newest signed", got, err)
	}
	if _, err := s.AddCosignature(small, "w/a", []byte("— a sig\n"), 1); err != nil {
		t.Fatal(err)
	}
	publish(t, s, "acct-2")
	large, err := log.Sign()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := log.Signed(); err != nil || string(got) != string(small.Note)+"— a sig\n" {
		t.Fatalf("Signed: %q, %v; want the witnessed checkpoint with its cosignature", got, err)
	}
	if got, err := log.Latest(); err != nil || !bytes.Equal(got, large.Note) {
		t.Fatalf("Latest: %q, %v; want the newest signed", got, err)
	}
	if got, err := translog.New(s, key, 0).Signed(); err != nil || !bytes.Equal(got, large.Note) {
		t.Fatalf("Signed without a quorum: %q, %v; want the newest signed", got, err)
	}
	verifier, err := note.NewVerifier(string(bytes.TrimSuffix(log.VerifierKey(), []byte("\n"))))
	if err != nil || string(log.VerifierKey()) != key.VerifierKey+"\n" {
		t.Fatalf("verifier key %q: %v", log.VerifierKey(), err)
	}
	if _, err := note.Open(large.Note, note.VerifierList(verifier)); err != nil {
		t.Fatalf("the checkpoint does not verify under the log's key: %v", err)
	}
}
