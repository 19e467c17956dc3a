package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sealbox/blobs/s3test"
	"sealbox/kv"
	"sealbox/kv/bolt"
	"sealbox/kv/pgtest"
)

// TestDevFillMakesAValidStore: a small fill holds what was asked (accounts,
// albums, ops, sessions, shares, blobs), check --deep finds nothing wrong
// with it, and a second fill of the same directory is refused, so the
// harness cannot measure a store that is not one the server could have
// made.
func TestDevFillMakesAValidStore(t *testing.T) {
	loc := Location{Data: filepath.Join(t.TempDir(), "data")}
	if pgtest.Enabled() || s3test.Enabled() {
		loc = engineLocation(t)
	}
	args := append([]string{"dev", "fill", "--items", "200", "--accounts", "3", "--albums", "4",
		"--chain-every", "10", "--chain-len", "3", "--sessions", "10", "--shares", "5",
		"--large-every", "50", "--large-size", "100KiB", "--batch", "64"}, loc.args()...)
	mustCLI(t, "", args...)

	var rep fillReport
	raw, err := os.ReadFile(filepath.Join(loc.Data, fillFile))
	if err != nil || json.Unmarshal(raw, &rep) != nil {
		t.Fatalf("fill file: %v %s", err, raw)
	}
	// 200 creates, and 3 replaces on each of the 20 assets with a chain;
	// every op stores a manifest and a metadata blob, every asset an
	// original.
	want := fillReport{Items: 200, Ops: 200 + 20*3, Blobs: 200 + 2*(200+20*3), Sessions: 10, Shares: 5}
	if rep.Items != want.Items || rep.Ops != want.Ops || rep.Blobs != want.Blobs || rep.Sessions != want.Sessions ||
		rep.Shares != want.Shares || len(rep.Accounts) != 3 {
		t.Fatalf("fill report %+v, want %+v and 3 accounts", rep, want)
	}

	out, _ := mustCLI(t, "", append([]string{"check", "--deep"}, loc.args()...)...)
	if !strings.Contains(out, fmt.Sprintf("all %d referenced blobs are present and whole", want.Blobs)) {
		t.Fatalf("check --deep: %s", out)
	}
	if _, errOut, err := runCLI(t, "", args...); err == nil || !strings.Contains(err.Error()+errOut, "empty") {
		t.Fatalf("a second fill of the same store: %v %s", err, errOut)
	}
	store, err := loc.openStore(t.Context(), kv.Options{ReadOnly: true}, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ops, albums, sessions := 0, 0, 0
	for _, a := range rep.Accounts {
		list, err := store.Albums(a.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, al := range list {
			ops += int(al.SyncSeq)
		}
		albums += len(list)
		n, err := store.UserSummary(a.Email)
		if err != nil {
			t.Fatal(err)
		}
		sessions += n.LiveSessions
	}
	if ops != want.Ops || albums != 3*4 || sessions != want.Sessions {
		t.Fatalf("the store holds %d ops in %d albums and %d sessions, want %d in 12 and %d", ops, albums, sessions, want.Ops, want.Sessions)
	}
}
