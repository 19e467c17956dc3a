package cli

import (
	"encoding/base64"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sealbox/server"
)

// TestDeletePhotoThenGC: photos deleted with tombstones and purged from the
// trash release what only they named, and the gc that follows frees exactly
// the blobs nobody holds: a deleted photo's blob another account holds
// stays, one only it held goes, and a live photo's stays.
func TestDeletePhotoThenGC(t *testing.T) {
	dir := t.TempDir()
	var ahead atomic.Int64
	clock := func(c *server.Config) {
		c.Now = func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
		c.Trash = 24 * time.Hour
	}
	hourly := func(s *Serve) { s.Maintenance.Interval = time.Hour }
	url, stop := runServeWith(t, Location{Data: dir}, hourly, openRegistration, clock)
	t.Cleanup(stop)
	api := apiClient{t, url}
	ann, annUp := api.account("ann@example.org")
	bob, bobUp := api.account("bob@example.org")
	shared, own, kept := blob(1), blob(2), blob(3)
	for _, p := range []struct {
		token, upload string
		data          []byte
	}{{ann, annUp, shared}, {ann, annUp, own}, {ann, annUp, kept}, {bob, bobUp, shared}} {
		if status := api.put(p.token, p.upload, p.data); status != 201 {
			t.Fatalf("upload: %d", status)
		}
	}
	annID := ""
	if status, m := api.do("GET", "/v1/auth/profile", ann, "", nil); status == 200 {
		annID = m["user_id"].(string)
	}
	album := hashHex([]byte("ann@example.org"))[:8] + "-0000-4000-8000-000000000000"
	photo := func(file, ciphertext string) (head string) {
		manifest := []byte("signed manifest of " + file)
		status, m := api.json("POST", "/v1/albums/"+album+"/ops", ann, map[string]any{
			"manifest_envelope": map[string]any{
				"crypto_suite_id": 1, "protocol_version": server.DefaultConfig().ProtocolMax, "album_id": album, "file_id": file,
				"amk_version": 0, "ciphertext_hash": ciphertext, "plaintext_size": 1, "chunk_size": 65536, "key_mode": "derived",
				"created_by_user": annID, "created_by_device": "7d1c2b9e-3d4a-4e5f-8a7b-1c2d3e4f5a6b",
				"client_version": "test/1", "timestamp": "2026-11-22T10:00:00Z", "action": "create",
			},
			"manifest_cbor": base64.StdEncoding.EncodeToString(manifest),
		})
		if status != 200 {
			t.Fatalf("op: %d %v", status, m)
		}
		return hashHex(manifest)
	}
	photo("f0000000-0000-4000-8000-000000000001", hashHex(kept))
	for i, b := range [][]byte{shared, own} {
		file := "f0000000-0000-4000-8000-00000000001" + string(rune('0'+i))
		head := photo(file, hashHex(b))
		status, m := api.json("POST", "/v1/albums/"+album+"/tombstones", ann, map[string]any{
			"tombstone_envelope": map[string]any{
				"crypto_suite_id": 1, "protocol_version": server.DefaultConfig().ProtocolMax, "album_id": album, "file_id": file,
				"created_by_user": annID, "created_by_device": "7d1c2b9e-3d4a-4e5f-8a7b-1c2d3e4f5a6b",
				"client_version": "test/1", "timestamp": "2026-11-22T10:00:00Z", "prior_provenance_hash": head,
			},
			"tombstone_cbor": base64.StdEncoding.EncodeToString([]byte("signed tombstone of " + file)),
		})
		if status != 200 || m["action"] != "delete" {
			t.Fatalf("tombstone: %d %v", status, m)
		}
	}
	long := time.Now().Add(-48 * time.Hour)
	for _, b := range [][]byte{shared, own, kept} {
		os.Chtimes(blobPath(dir, hashHex(b)), long, long)
	}
	// Within the trash window gc frees nothing.
	if out, _ := mustCLI(t, "", "gc", "--data", dir); !strings.Contains(out, "removed 0 unreferenced blobs") {
		t.Fatalf("gc within the trash window: %q", out)
	}
	ahead.Store(int64(25 * time.Hour))
	out, _ := mustCLI(t, "", "gc", "--data", dir)
	if !strings.Contains(out, "removed 1 unreferenced blobs") {
		t.Fatalf("gc after the purge: %q", out)
	}
	for b, want := range map[string]bool{hashHex(shared): true, hashHex(own): false, hashHex(kept): true} {
		if _, err := os.Stat(blobPath(dir, b)); (err == nil) != want {
			t.Errorf("blob %s after gc: present %v, want %v", b[:8], err == nil, want)
		}
	}
	if status, _ := api.do("GET", "/v1/blobs/"+hashHex(shared), api.signIn("bob@example.org", "password-bob@example.org"), "", nil); status != 200 {
		t.Fatalf("bob's shared blob after gc: %d", status)
	}
}
