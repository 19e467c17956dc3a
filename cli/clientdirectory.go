package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"

	"sealbox/cli/client"
	"sealbox/cli/sealed"
	"sealbox/kv/fault"
)

// The account's device directory, as a client reads and publishes it
// (cli/sealed/FORMAT.md §14): a directory is used only once it is proven to
// be the one the transparency log holds (server/PROTOCOL.md §16), by the
// same verification as sealbox audit (Audit.ProveRecord), against the last
// checkpoint this device kept.

// directoryWait is how long a client waits for a directory's record to be
// in a signed checkpoint: the server signs every 5 s by default.
const directoryWait = 30 * time.Second

// directoryPublishTries bounds the re-reads after a version conflict
// (another device published in between).
const directoryPublishTries = 5

// logAudit is the log check of this device: the log key kept in the
// profile (taken from the server the first time, then trusted), the
// witnesses given at sign-in, and the last checkpoint kept in the profile's
// state directory.
func (a *account) logAudit(ctx context.Context) (*Audit, error) {
	trust, err := a.profile.LogTrust(a.session.Server)
	if err != nil {
		return nil, refused(err)
	}
	audit := &Audit{Server: trust.Server, LogKey: trust.LogKey, Witnesses: trust.Witnesses,
		Quorum: len(trust.Witnesses), StateDir: filepath.Join(a.profile.StateDir, "transparency"),
		api: a.client, Out: io.Discard, Now: time.Now, After: time.After, Wait: directoryWait}
	if trust.LogKey == "" {
		served, err := audit.fetch("/v1/transparency/key", func() ([]byte, error) { return a.client.TransparencyKey(ctx) })
		if err != nil {
			return nil, err
		}
		trust.LogKey = strings.TrimSpace(string(served))
		if _, err := note.NewVerifier(trust.LogKey); err != nil {
			return nil, refused(fmt.Errorf("the server's transparency log key %q: %v", trust.LogKey, err))
		}
		if err := a.profile.SaveLogTrust(trust); err != nil {
			return nil, err
		}
		audit.LogKey = trust.LogKey
	}
	return audit, nil
}

// errNoDirectory is an account that has published no directory.
var errNoDirectory = errors.New("the account has no device directory")

// readDirectory reads the account's directory and uses it only when the
// server pins this account's identity key, the identity key signed it, and
// its record is in the transparency log, proven against the last
// checkpoint this device kept. It returns errNoDirectory when there is
// none.
func (a *account) readDirectory(ctx context.Context) (sealed.Directory, error) {
	got, err := a.client.Directory(ctx, a.session.UserID)
	if client.CodeOf(err) == fault.ECodeDirectoryNotFound {
		return sealed.Directory{}, errNoDirectory
	}
	if err != nil {
		return sealed.Directory{}, err
	}
	identity := a.keys.Identity.Identity().PublicKey()
	if !bytes.Equal(got.IdentityKey, identity) {
		return sealed.Directory{}, errors.New("the directory is refused: the server pins another identity key than this account's")
	}
	d, err := sealed.OpenDirectory(got.Bytes, identity)
	if err != nil {
		return sealed.Directory{}, fmt.Errorf("the directory is refused: %w", err)
	}
	if d.UserID != a.session.UserID {
		return sealed.Directory{}, fmt.Errorf("the directory is refused: it is account %s's, not this one's", d.UserID)
	}
	dirSum, keySum := sha256.Sum256(got.Bytes), sha256.Sum256(identity)
	record := logRecord{Kind: kindDirectory, UserID: d.UserID, Version: d.Version,
		DirectoryHash: hex.EncodeToString(dirSum[:]), KeyHash: hex.EncodeToString(keySum[:])}
	audit, err := a.logAudit(ctx)
	if err != nil {
		return sealed.Directory{}, err
	}
	if err := audit.ProveRecord(ctx, got.Index, []byte(record.String())); err != nil {
		return sealed.Directory{}, fmt.Errorf("the directory is refused: %w", err)
	}
	return d, nil
}

// publishDevices publishes the next version of the account's directory,
// its devices changed by change, signed with the identity key. On a
// version conflict (another device published in between) it reads the
// stored directory again and signs its change above it.
func (a *account) publishDevices(ctx context.Context, change func([]sealed.DirectoryDevice) []sealed.DirectoryDevice) error {
	for try := 1; ; try++ {
		d, err := a.readDirectory(ctx)
		if errors.Is(err, errNoDirectory) {
			d, err = sealed.Directory{UserID: a.session.UserID}, nil
		}
		if err != nil {
			return err
		}
		next := sealed.Directory{Version: d.Version + 1, UserID: a.session.UserID, Devices: change(d.Devices)}
		b, err := sealed.SignDirectory(next, a.keys.Identity.Identity())
		if err != nil {
			return err
		}
		err = a.client.PublishDirectory(ctx, b, a.keys.Identity.Identity().PublicKey())
		if client.CodeOf(err) != fault.ECodeDirectoryVersionConflict || try == directoryPublishTries {
			return err
		}
	}
}

// withDevice is change that lists this device with its key, in place of
// any earlier entry of it.
func (a *account) withDevice(devices []sealed.DirectoryDevice) []sealed.DirectoryDevice {
	key, err := sealed.ParseDeviceKey(a.keys.Device[:])
	if err != nil {
		panic("cli: a device key that parsed when made no longer parses: " + err.Error())
	}
	out := withoutDevice(devices, a.session.DeviceID)
	return append(out, sealed.DirectoryDevice{DeviceID: a.session.DeviceID, PublicKey: key.PublicKey()})
}

// withoutDevice is devices without the device id.
func withoutDevice(devices []sealed.DirectoryDevice, id string) []sealed.DirectoryDevice {
	out := []sealed.DirectoryDevice{}
	for _, d := range devices {
		if d.DeviceID != id {
			out = append(out, d)
		}
	}
	return out
}
