package library

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sealbox/cli/client"
	"sealbox/cli/sealed"
)

// TestProfile: a profile keeps the session and the keys in files of mode
// 0600 in a directory of mode 0700, refuses a directory or a file others
// can read, and Forget removes the session and the keys.
func TestProfile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "profile")
	p, err := OpenProfile(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Fatalf("the profile directory is %04o, want 0700", fi.Mode().Perm())
	}
	if _, err := p.Session(); !errors.Is(err, ErrSignedOut) {
		t.Fatalf("a new profile's session: %v", err)
	}
	s := &Session{Server: "https://photos.example.org", Email: "a@example.org", Tokens: client.Tokens{Access: "sbx_at_x", Refresh: "sbx_rt_y"}}
	k := &Keys{Master: sealed.NewMasterKey(), Identity: sealed.NewIdentitySeed()}
	if err := p.SaveSession(s); err != nil {
		t.Fatal(err)
	}
	if err := p.SaveKeys(k); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{sessionFile, keysFile} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, mode %v; want 0600", f, err, fi.Mode().Perm())
		}
	}
	if got, err := p.Keys(); err != nil || *got != *k {
		t.Fatalf("the keys read back: %v", err)
	}
	if got, err := p.Session(); err != nil || got.Tokens != s.Tokens || got.Email != s.Email {
		t.Fatalf("the session read back: %+v, %v", got, err)
	}

	os.Chmod(filepath.Join(dir, keysFile), 0o644)
	if _, err := p.Keys(); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a keys file others can read: %v", err)
	}
	os.Chmod(dir, 0o750)
	if _, err := OpenProfile(dir); err == nil || !strings.Contains(err.Error(), "chmod 700") {
		t.Fatalf("a profile directory others can read: %v", err)
	}
	os.Chmod(dir, 0o700)
	if err := p.Forget(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Keys(); !errors.Is(err, ErrSignedOut) {
		t.Fatalf("after Forget: %v", err)
	}
}

// TestIndex: a file recorded as synced is unchanged only with its size,
// time and inode; its content finds its asset in its album only; a staged
// upload is intact only while its files are whole.
func TestIndex(t *testing.T) {
	p, err := OpenProfile(filepath.Join(t.TempDir(), "profile"))
	if err != nil {
		t.Fatal(err)
	}
	ix, err := p.OpenIndex()
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if _, err := p.OpenIndex(); err == nil || !strings.Contains(err.Error(), "another sealbox client") {
		t.Fatalf("a second client on the profile: %v", err)
	}
	rec := &FileRecord{Size: 10, ModTime: 20, Inode: 30, AlbumID: "album", FileID: "file", ContentHMAC: "hmac", NoThumbnail: true}
	if err := ix.Synced("/photos/a.jpg", rec); err != nil {
		t.Fatal(err)
	}
	got, err := ix.File("/photos/a.jpg")
	if err != nil || !got.Unchanged(10, 20, 30) || got.Unchanged(10, 21, 30) || got.Unchanged(10, 20, 31) || got.Unchanged(11, 20, 30) {
		t.Fatalf("the record: %+v, %v", got, err)
	}
	if id, _ := ix.AssetByContent("album", "hmac"); id != "file" {
		t.Fatalf("by content: %q", id)
	}
	if id, _ := ix.AssetByContent("other album", "hmac"); id != "" {
		t.Fatalf("by content in another album: %q", id)
	}
	staged := filepath.Join(t.TempDir(), "blob")
	os.WriteFile(staged, []byte("sealed"), 0o600)
	pending := &PendingUpload{FileID: "f", Original: StagedBlob{Path: staged, Hash: "h", Size: 6}, Metadata: []byte("m"), Manifest: []byte("c")}
	if err := ix.SavePending("/photos/b.jpg", pending); err != nil {
		t.Fatal(err)
	}
	if got, _ := ix.Pending("/photos/b.jpg"); got == nil || !got.intact() {
		t.Fatal("a whole staged upload is not intact")
	}
	os.WriteFile(staged, []byte("cut"), 0o600)
	if got, _ := ix.Pending("/photos/b.jpg"); got.intact() {
		t.Fatal("a staged upload whose file was cut is intact")
	}
	st, err := ix.Stats()
	if err != nil || st.Files != 1 || st.Pending != 1 || len(st.NoThumbnail) != 1 {
		t.Fatalf("stats: %+v, %v", st, err)
	}
}
