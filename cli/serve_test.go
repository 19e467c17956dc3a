package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"sealbox/server"
)

func TestLoadSealKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), keyFile)
	key, err := loadSealKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(key) != 32 {
		t.Fatalf("key length: got %d, want 32", len(key))
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode != 0o600 {
		t.Fatalf("key file mode: got %o, want 600", mode)
	}
	again, err := loadSealKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, key) {
		t.Fatal("a second start made a new key: every sealed secret would be lost")
	}
}

func TestLoadSealKeyRefusesWrongSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), keyFile)
	if err := os.WriteFile(path, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadSealKey(path); err == nil {
		t.Fatal("a 5-byte key file was accepted")
	}
	if b, _ := os.ReadFile(path); string(b) != "short" {
		t.Fatal("a bad key file was replaced")
	}
}

// The data directory gets its key on first start and the server seals with
// it.
func TestServeCreatesKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s := &Serve{DataDir: dir, Listen: "127.0.0.1:0", Config: server.DefaultConfig()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan struct{})
	s.Ready = func(string) { close(ready) }
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(filepath.Join(dir, keyFile))
	if err != nil || len(key) != 32 {
		t.Fatalf("server key after first start: %d bytes, %v", len(key), err)
	}
	if !bytes.Equal(s.Config.SealKey, key) {
		t.Fatal("the server was not given the key file's key")
	}
}
