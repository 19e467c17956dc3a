package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"

	"sealbox/kv/bolt"
	"sealbox/kv/engine"
	"sealbox/server/hybridsig"
)

// get reads url's body and fails unless it answers 200.
func get(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	return body
}

// waitCheckpoint reads url, a checkpoint, until it names a tree of size
// records: the server signs one in the background within an interval.
func waitCheckpoint(t *testing.T, url string, size int64) []byte {
	t.Helper()
	want := []byte(fmt.Sprintf("\n%d\n", size))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		cp := get(t, url)
		if bytes.Contains(cp, want) {
			return cp
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint of %d records after 10s; the last:\n%s", size, cp)
		}
	}
}

// TestTransparencyLogAcrossBackupAndRestore: the log's key file is made at
// first start and travels with backups, so a restored server serves the
// same signed checkpoint with the same key; --log-origin cannot rename a
// log whose key exists; and a log that no longer extends its signed
// checkpoint stops serve from starting.
func TestTransparencyLogAcrossBackupAndRestore(t *testing.T) {
	dir := t.TempDir()
	api := apiClient{t, startServe(t, dir, openRegistration)}
	token, _ := api.account("log@example.org")
	key := hybridsig.NewDevKey([32]byte{'l', 'o', 'g'})
	for version := uint64(1); version <= 3; version++ {
		body, _ := cbor.Marshal(map[string]any{"directory_version": version})
		req, _ := http.NewRequest("POST", api.url+"/v1/auth/devices/directory", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/cbor")
		req.Header.Set("X-Service-Identity-Key", key.PublicKeyBase64())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("X-Transparency-Index") != string(rune('0'+version-1)) {
			t.Fatalf("publish %d: %d, index %q", version, resp.StatusCode, resp.Header.Get("X-Transparency-Index"))
		}
	}
	checkpoint := waitCheckpoint(t, api.url+"/v1/transparency/checkpoint", 3)
	logKey := get(t, api.url+"/v1/transparency/key")
	if !bytes.HasPrefix(logKey, []byte("sealbox/")) || !bytes.Contains(checkpoint, []byte("\n3\n")) {
		t.Fatalf("key %q, checkpoint %q", logKey, checkpoint)
	}
	if fi, err := os.Stat(filepath.Join(dir, "transparency.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the log key file: %v %v", fi, err)
	}

	backup := filepath.Join(t.TempDir(), "backup")
	mustCLI(t, "", "backup", backup, "--data", dir)
	restored := filepath.Join(t.TempDir(), "restored")
	mustCLI(t, "", "restore", backup, "--data", restored)
	url := startServe(t, restored)
	if got := get(t, url+"/v1/transparency/checkpoint"); !bytes.Equal(got, checkpoint) {
		t.Fatalf("the restored server serves another checkpoint:\n%s\nwas\n%s", got, checkpoint)
	}
	if got := get(t, url+"/v1/transparency/key"); !bytes.Equal(got, logKey) {
		t.Fatalf("the restored server has another log key: %q, was %q", got, logKey)
	}

	// The origin is the key's name, fixed at first start.
	renamed := filepath.Join(t.TempDir(), "renamed")
	mustCLI(t, "", "restore", backup, "--data", renamed)
	if _, err := runServeCmd(t.Context(), "--data", renamed, "--listen", "127.0.0.1:0", "--log-origin", "sealbox/elsewhere"); err == nil || !strings.Contains(err.Error(), "--log-origin") {
		t.Fatalf("serve with another --log-origin: %v", err)
	}

	// A log cut back below what it signed: serve refuses to sign on top.
	rolledBack := filepath.Join(t.TempDir(), "rolled-back")
	mustCLI(t, "", "restore", backup, "--data", rolledBack)
	db, err := bolt.Open(filepath.Join(rolledBack, dbFile), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx engine.Tx) error {
		return tx.Bucket([]byte("log")).Delete(binary.BigEndian.AppendUint64(nil, 2))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runServeCmd(t.Context(), "--data", rolledBack, "--listen", "127.0.0.1:0"); err == nil || !strings.Contains(err.Error(), "fewer than the 3 of its last signed checkpoint") {
		t.Fatalf("serve on a rolled-back log: %v", err)
	}
	if out, _, err := runCLI(t, "", "check", "--data", rolledBack); err == nil || !strings.Contains(out, "transparency log") {
		t.Fatalf("check on a rolled-back log: %v %q", err, out)
	}
}

// TestUsersResetDirectory: a token thief pinned its key at the largest
// version; `sealbox users reset-directory` (through the running server)
// closes the account's sessions, clears the directory and the pin, and
// appends a reset record the log serves, after the thief's record; the
// owner then pins a new key from version 1. On an account without a
// directory it says so and changes nothing in the log.
func TestUsersResetDirectory(t *testing.T) {
	dir := t.TempDir()
	api := apiClient{t, startServe(t, dir, openRegistration)}
	token, _ := api.account("victim@example.org")
	thief := hybridsig.NewDevKey([32]byte{'t', 'h', 'i', 'e', 'f'})
	owner := hybridsig.NewDevKey([32]byte{'o', 'w', 'n', 'e', 'r'})
	publish := func(token string, key *hybridsig.DevKey, version uint64) (int, string) {
		t.Helper()
		body, _ := cbor.Marshal(map[string]any{"directory_version": version})
		req, _ := http.NewRequest("POST", api.url+"/v1/auth/devices/directory", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/cbor")
		req.Header.Set("X-Service-Identity-Key", key.PublicKeyBase64())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("X-Transparency-Index")
	}
	if status, index := publish(token, thief, 1<<53-1); status != 200 || index != "0" {
		t.Fatalf("the thief's publish: %d, index %q", status, index)
	}
	if status, _ := publish(token, owner, 2); status != 403 {
		t.Fatalf("the owner's publish under another key: %d, want 403", status)
	}
	userID := usersJSON(t, dir)[0].UserID

	out, how := mustCLI(t, "", "users", "reset-directory", "Victim@example.org", "--data", dir)
	if !strings.Contains(how, "using the running server") ||
		!strings.Contains(out, "directory and pinned identity key cleared for victim@example.org ("+userID+"); 1 session closed") ||
		!strings.Contains(out, "the reset is transparency log record 1") {
		t.Fatalf("reset-directory: %q %q", how, out)
	}
	if status, _ := api.do("GET", "/v1/auth/profile", token, "", nil); status != 401 {
		t.Fatalf("a session survived reset-directory: profile answered %d", status)
	}
	token = api.signIn("victim@example.org", "password-victim@example.org")
	if status, _ := api.do("GET", "/v1/auth/devices/directory/"+userID, token, "", nil); status != 404 {
		t.Fatalf("the directory after the reset: %d, want 404", status)
	}
	if status, index := publish(token, owner, 1); status != 200 || index != "2" {
		t.Fatalf("the owner's first publish after the reset: %d, index %q", status, index)
	}
	thiefKey := sha256.Sum256(thief.PublicKey())
	wantReset := fmt.Sprintf("sealbox-directory-reset/v1 %s %d %x\n", userID, uint64(1<<53-1), thiefKey)
	bundle := get(t, api.url+"/v1/transparency/tile/entries/000.p/3")
	var records []string
	for len(bundle) >= 2 {
		n := int(binary.BigEndian.Uint16(bundle))
		records = append(records, string(bundle[2:2+n]))
		bundle = bundle[2+n:]
	}
	if len(records) != 3 || records[1] != wantReset || !strings.HasPrefix(records[2], "sealbox-directory/v1 "+userID+" 1 ") {
		t.Fatalf("the log's records: %q, want the reset %q second", records, wantReset)
	}
	// sealbox audit lists the reset among the account's records, once a
	// checkpoint of all three is signed (in the background, every 100 ms here).
	for deadline := time.Now().Add(10 * time.Second); !bytes.Contains(get(t, api.url+"/v1/transparency/checkpoint"), []byte("\n3\n")); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint of the log's 3 records was signed")
		}
	}
	code, out := runAudit(t, t.TempDir(), "--server", api.url, "--log-key", strings.TrimSpace(string(get(t, api.url+"/v1/transparency/key"))), "--account", userID)
	wantLine := fmt.Sprintf("index 1  reset by the operator: version %d cleared, key %x unpinned", uint64(1<<53-1), thiefKey)
	if code != 0 || !strings.Contains(out, wantLine) || !strings.Contains(out, "3 directory records of account "+userID) {
		t.Fatalf("audit of the account: exit %d\n%s\nwant the line %q", code, out, wantLine)
	}

	api.account("never@example.org")
	out, _ = mustCLI(t, "", "users", "reset-directory", "never@example.org", "--data", dir)
	if !strings.Contains(out, "has no directory; nothing to clear, 1 session closed") {
		t.Fatalf("reset-directory of an account without one: %q", out)
	}
	// The log holds three records still: no bundle of four (checkpoints are
	// signed in the background, so the tiles tell the size at once).
	if status, _ := api.do("GET", "/v1/transparency/tile/entries/000.p/4", "", "", nil); status != 404 {
		t.Fatalf("a reset of an account without a directory appended to the log: a bundle of 4 answered %d", status)
	}
	if _, _, err := runCLI(t, "", "users", "reset-directory", "nobody@example.org", "--data", dir); err == nil {
		t.Fatal("reset-directory of an unknown account succeeded")
	}
}
