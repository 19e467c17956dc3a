// Package library is the client's side of a person's photos: the profile
// that holds the session and the keys on this device, the local index that
// makes a second sync read nothing unchanged, and the sync and export
// between a folder and the server. It seals with cli/sealed and speaks to
// the server with cli/client; nothing it sends is a plaintext or a hash of
// one.
package library

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"sealbox/cli/client"
	"sealbox/cli/sealed"
	"sealbox/kv/durable"
)

// Profile is where one client keeps its state: the session and the keys
// (config) and the index and unfinished uploads (state). Both are
// directories of mode 0700 holding files of mode 0600; a directory others
// can read is refused rather than used, since the keys open every photo.
type Profile struct {
	ConfigDir string
	StateDir  string
}

// OpenProfile opens the profile in dir, both halves in it, or without a dir
// in $XDG_CONFIG_HOME/sealbox and $XDG_STATE_HOME/sealbox (~/.config and
// ~/.local/state when unset). The directories are made when missing.
func OpenProfile(dir string) (*Profile, error) {
	p := &Profile{ConfigDir: dir, StateDir: dir}
	if dir == "" {
		config, err := xdgDir("XDG_CONFIG_HOME", ".config")
		if err != nil {
			return nil, err
		}
		state, err := xdgDir("XDG_STATE_HOME", filepath.Join(".local", "state"))
		if err != nil {
			return nil, err
		}
		p.ConfigDir, p.StateDir = filepath.Join(config, "sealbox"), filepath.Join(state, "sealbox")
	}
	for _, d := range []string{p.ConfigDir, p.StateDir} {
		if err := privateDir(d); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func xdgDir(variable, underHome string) (string, error) {
	if d := os.Getenv(variable); d != "" {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no home directory for the client's profile: give --profile DIR")
	}
	return filepath.Join(home, underHome), nil
}

// privateDir makes dir (mode 0700) or checks that the existing one is no
// one else's to read.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("the profile directory: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("the profile %s is not a directory", dir)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("the profile directory %s can be read by other users (mode %04o); it holds the keys to your photos: run chmod 700 %s", dir, fi.Mode().Perm(), dir)
	}
	return nil
}

// Session is a signed-in account as this device keeps it.
type Session struct {
	Server   string        `json:"server"`
	Email    string        `json:"email"`
	UserID   string        `json:"user_id"`
	DeviceID string        `json:"device_id"`
	Tokens   client.Tokens `json:"tokens"`
}

// Keys are the account's secrets as this device holds them, opened from
// the escrow at sign-in.
type Keys struct {
	Master   sealed.MasterKey    `json:"master_key"`
	Identity sealed.IdentitySeed `json:"identity_seed"`
	// Device is this device's X25519 private key (cli/sealed/FORMAT.md
	// §10), whose public key the directory lists; zero on a device signed
	// in with the password alone, which is in no directory.
	Device [32]byte `json:"device_key,omitzero"`
	// SignupUnfinished: a signup made these keys and failed before the
	// server held their escrow and directory, or before the recovery key
	// was shown: this file is their only sure copy until signup, run again,
	// finishes (Signup).
	SignupUnfinished bool `json:"signup_unfinished,omitempty"`
}

// LogTrust is what this device trusts a server's transparency log with
// (server/PROTOCOL.md §16): the log's key, taken from the server the first
// time it was needed and kept from then on, and the witnesses given at
// sign-in, all of whom must have cosigned a checkpoint. It is one server's:
// a profile signed in to another server after a logout starts afresh
// there. The last checkpoint seen is kept in the state directory, under
// transparency/, by log key.
type LogTrust struct {
	// Server is the address of the server whose log this is, as the
	// session records it; "" in a file written before trust named its
	// server, which is taken as the profile's current server's.
	Server    string   `json:"server,omitempty"`
	LogKey    string   `json:"log_key,omitempty"`
	Witnesses []string `json:"witnesses,omitempty"`
}

// LogTrust reads what the device trusts server's log with; none yet, or
// only another server's, is a LogTrust naming server alone.
func (p *Profile) LogTrust(server string) (LogTrust, error) {
	server = strings.TrimSuffix(server, "/")
	var t LogTrust
	err := p.read(logTrustFile, &t)
	if errors.Is(err, ErrSignedOut) || err == nil && t.Server != "" && t.Server != server {
		return LogTrust{Server: server}, nil
	}
	t.Server = server
	return t, err
}

// SaveLogTrust writes what the device trusts the log with.
func (p *Profile) SaveLogTrust(t LogTrust) error { return p.write(logTrustFile, t) }

const (
	sessionFile = "session.json"
	keysFile    = "keys.json"
	// logTrustFile stays through sign-out: the log key is the server's,
	// not the account's.
	logTrustFile = "transparency.json"
)

// ErrSignedOut is a profile with no session: sign in first.
var ErrSignedOut = errors.New("not signed in on this device: run sealbox client login URL (or signup)")

// Session reads the signed-in session.
func (p *Profile) Session() (*Session, error) {
	var s Session
	if err := p.read(sessionFile, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// SaveSession writes the session, replacing the one before.
func (p *Profile) SaveSession(s *Session) error { return p.write(sessionFile, s) }

// Keys reads the account's keys.
func (p *Profile) Keys() (*Keys, error) {
	var k Keys
	if err := p.read(keysFile, &k); err != nil {
		return nil, err
	}
	return &k, nil
}

// SaveKeys writes the account's keys.
func (p *Profile) SaveKeys(k *Keys) error { return p.write(keysFile, k) }

// Forget removes the account from this device (sign-out): the index, whose
// albums' keys open every photo synced from here (an asset's key derives
// from its album's) and whose links hold their secrets, the uploads staged
// for the account, the keys and the session. The session goes last, so a
// sign-out that fails part way leaves a profile still signed in, to sign
// out again. Nothing of the account is kept for the next one: an index it
// kept would tell a sync to another account, or another server, that its
// files were sent.
func (p *Profile) Forget() error {
	if err := os.RemoveAll(filepath.Join(p.StateDir, stagedDir)); err != nil {
		return err
	}
	for _, f := range []string{filepath.Join(p.StateDir, indexFile), filepath.Join(p.ConfigDir, keysFile), filepath.Join(p.ConfigDir, sessionFile)} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

func (p *Profile) read(name string, v any) error {
	path := filepath.Join(p.ConfigDir, name)
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return ErrSignedOut
	}
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s can be read by other users (mode %04o): run chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s is damaged (%v): sign in again", path, err)
	}
	return nil
}

// write replaces name whole: a new file of mode 0600, synced, renamed over
// the old one, so a crash leaves the old file or the new one.
func (p *Profile) write(name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(p.ConfigDir, name), b, 0o600)
}

// writeFileAtomic writes b to path through a temporary file beside it
// (created exclusively), synced before it is renamed into place.
func writeFileAtomic(path string, b []byte, mode fs.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after the rename, a no-op
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	_, err = f.Write(b)
	if err := durable.Close(f, err); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
