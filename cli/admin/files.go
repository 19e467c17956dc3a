package admin

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/mod/sumdb/note"

	"sealbox/kv/durable"
	"sealbox/server/secrets"
)

// The files a backup or a restore writes for the operator are created, never
// opened: a name that already exists, as a file or as a symlink, is never
// written through, so a file planted in the destination cannot make sealbox
// overwrite what it points to, nor lend its own mode to a key.

// Modes of the files written: keys are for the server's user alone; the
// store may be read by the group (a backup job's).
const (
	keyMode   fs.FileMode = 0o600
	storeMode fs.FileMode = 0o640
)

// maxLogKeyBytes bounds a transparency log key file (two lines of note key,
// about 150 bytes), so reading a crafted one costs nothing.
const maxLogKeyBytes = 4 << 10

// createExclusive creates the file path for writing with mode (less the
// umask). It fails if anything exists at path, a symlink included: O_EXCL
// never follows one, and O_NOFOLLOW says so twice.
func createExclusive(path string, mode fs.FileMode) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode)
}

// createTemp creates path (a temporary name of sealbox's own) afresh with
// createExclusive, removing what an interrupted run left there first. A
// symlink found there is removed, not followed.
func createTemp(path string, mode fs.FileMode) (*os.File, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return createExclusive(path, mode)
}

// writeFileAtomic writes data as path durably: into a new temporary file
// beside it (createTemp), fsynced, renamed over path and the directory
// fsynced. A rename replaces whatever was at path, a symlink included,
// without following it.
func writeFileAtomic(path string, data []byte, mode fs.FileMode) error {
	tmp := path + ".tmp"
	f, err := createTemp(tmp, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	err = durable.Close(f, err)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return durable.SyncDir(filepath.Dir(path))
}

// readRegular reads the file at path, which must be a regular file of at
// most max bytes. A symlink is refused, not followed, and so is a device or
// a FIFO (opened without blocking, so a FIFO cannot stall the caller).
func readRegular(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s is a symbolic link, not a file: refused", path)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s): refused", path, fi.Mode().Type())
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%s holds %d bytes, more than a key file ever does (%d): refused", path, fi.Size(), max)
	}
	return io.ReadAll(io.LimitReader(f, max+1))
}

// requireRegular refuses path unless it is a regular file (not a symlink).
func requireRegular(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%s): refused", path, fi.Mode().Type())
	}
	return nil
}

// keyFiles are the names of a data directory's key files.
var keyFiles = []string{KeyFile, LogKeyFile}

// readKeys reads the key files dir holds, each a regular file of its
// format (a server key of secrets.KeyLen bytes; a transparency log key that
// ParseLogKey accepts). A missing key is left out; any other kind of file,
// or a malformed key, is an error.
func readKeys(dir string) (map[string][]byte, error) {
	keys := map[string][]byte{}
	for _, name := range keyFiles {
		path := filepath.Join(dir, name)
		raw, err := readRegular(path, maxLogKeyBytes)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		switch name {
		case KeyFile:
			if len(raw) != secrets.KeyLen {
				return nil, fmt.Errorf("%s holds %d bytes, and a server key holds %d: refused", path, len(raw), secrets.KeyLen)
			}
		case LogKeyFile:
			if _, _, err := ParseLogKey(raw); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
		}
		keys[name] = raw
	}
	return keys, nil
}

// writeKeys writes keys (from readKeys) into dir, each with keyMode.
func writeKeys(dir string, keys map[string][]byte) error {
	for _, name := range keyFiles {
		if raw, ok := keys[name]; ok {
			if err := writeFileAtomic(filepath.Join(dir, name), raw, keyMode); err != nil {
				return err
			}
		}
	}
	return nil
}

// ParseLogKey parses a transparency log key file: two lines, the note
// signer key, then its verifier key, which must be the signer's.
func ParseLogKey(raw []byte) (signer note.Signer, verifierKey string, err error) {
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if len(lines) != 2 {
		return nil, "", errors.New("not a transparency log key (two lines: signer key, verifier key)")
	}
	signer, err = note.NewSigner(lines[0])
	if err != nil {
		return nil, "", err
	}
	verifier, err := note.NewVerifier(lines[1])
	if err != nil || verifier.Name() != signer.Name() || verifier.KeyHash() != signer.KeyHash() {
		return nil, "", errors.New("the verifier key is not the signer's")
	}
	return signer, lines[1], nil
}

// checkPrivateDir refuses a destination directory another user can write
// to: in one, that user could plant or swap the files sealbox writes. A
// directory writable by group or others is accepted only when it is sticky
// (no one may remove or rename another user's files) and owned by this
// process's user.
func checkPrivateDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	perm := fi.Mode().Perm()
	if perm&0o022 == 0 {
		return nil
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if fi.Mode()&fs.ModeSticky != 0 && ok && int(st.Uid) == os.Geteuid() {
		return nil
	}
	return fmt.Errorf("%s is writable by group or others (mode %04o): another user could plant files there that the backup would write through; make it private (chmod go-w %s), or give it the sticky bit and this server's user as owner", dir, perm, dir)
}
