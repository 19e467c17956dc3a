package sealed

import (
	"bytes"
	"fmt"

	"sealbox/server/hybridsig"
)

// The account's device directory (FORMAT.md §14): the devices that hold
// the account's keys, each with the X25519 key a master key is sealed to,
// signed with the identity key. The server stores the bytes verbatim and
// reads only directory_version; the transparency log records their hash.

// Directory is a directory's content.
type Directory struct {
	Version uint64            `cbor:"directory_version"`
	UserID  string            `cbor:"user_id"`
	Devices []DirectoryDevice `cbor:"devices"`
}

// DirectoryDevice is one device of the directory.
type DirectoryDevice struct {
	DeviceID  string `cbor:"device_id"`
	PublicKey []byte `cbor:"public_key"`
}

// signedDirectory is the encoded form: the content and its signature.
type signedDirectory struct {
	Version   uint64            `cbor:"directory_version"`
	UserID    string            `cbor:"user_id"`
	Devices   []DirectoryDevice `cbor:"devices"`
	Signature []byte            `cbor:"signature"`
}

// directoryPurpose prefixes what the identity key signs, so a signature
// made for anything else (a manifest, a revoke-all proof) is never one of
// a directory.
const directoryPurpose = "sealbox/v1/directory\x00"

// maxDirectoryDevices bounds a directory (the server takes 256 KiB).
const maxDirectoryDevices = 1000

func (d Directory) signingBytes() ([]byte, error) {
	b, err := manifestEnc.Marshal(d)
	if err != nil {
		return nil, err
	}
	return append([]byte(directoryPurpose), b...), nil
}

func (d Directory) check() error {
	if d.Version < 1 {
		return malformed("directory_version %d is not at least 1", d.Version)
	}
	if !canonicalUUID(d.UserID) {
		return malformed("directory user_id %q is not a canonical UUID", d.UserID)
	}
	if d.Devices == nil {
		return malformed("directory without devices")
	}
	if len(d.Devices) > maxDirectoryDevices {
		return malformed("directory of %d devices", len(d.Devices))
	}
	seen := map[string]bool{}
	for _, dev := range d.Devices {
		if !canonicalUUID(dev.DeviceID) || seen[dev.DeviceID] {
			return malformed("directory device_id %q is not a canonical UUID, or is there twice", dev.DeviceID)
		}
		seen[dev.DeviceID] = true
		if len(dev.PublicKey) != 32 {
			return malformed("directory device %s: public_key of %d bytes, not 32", dev.DeviceID, len(dev.PublicKey))
		}
	}
	return nil
}

// SignDirectory returns the directory's bytes, signed with id.
func SignDirectory(d Directory, id *Identity) ([]byte, error) {
	if d.Devices == nil {
		d.Devices = []DirectoryDevice{}
	}
	if err := d.check(); err != nil {
		return nil, err
	}
	msg, err := d.signingBytes()
	if err != nil {
		return nil, err
	}
	return manifestEnc.Marshal(signedDirectory{Version: d.Version, UserID: d.UserID, Devices: d.Devices, Signature: id.Sign(msg)})
}

// OpenDirectory reads a directory and checks its signature with the
// account's identity public key (1984 bytes). Bytes that are not a
// directory in its one encoding are ErrMalformed; a signature that does
// not verify is ErrAuth.
func OpenDirectory(b, identityKey []byte) (Directory, error) {
	var s signedDirectory
	if err := manifestDec.Unmarshal(b, &s); err != nil {
		return Directory{}, malformed("directory: %v", err)
	}
	d := Directory{Version: s.Version, UserID: s.UserID, Devices: s.Devices}
	if err := d.check(); err != nil {
		return Directory{}, err
	}
	if again, err := manifestEnc.Marshal(s); err != nil || !bytes.Equal(again, b) {
		return Directory{}, malformed("directory is not in its canonical encoding")
	}
	pk, err := hybridsig.ParsePublicKey(identityKey)
	if err != nil {
		return Directory{}, malformed("identity key: %v", err)
	}
	msg, err := d.signingBytes()
	if err != nil {
		return Directory{}, err
	}
	if err := pk.Verify(msg, s.Signature); err != nil {
		return Directory{}, fmt.Errorf("%w: the directory's signature does not verify with the account's identity key", ErrAuth)
	}
	return d, nil
}
