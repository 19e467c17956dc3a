package sealed

import (
	"bytes"
	"errors"
	"testing"
)

var testDirectory = Directory{Version: 2, UserID: "6f1c2a3b-0000-4000-8000-000000000001", Devices: []DirectoryDevice{
	{DeviceID: "6f1c2a3b-0000-4000-8000-00000000000a", PublicKey: bytes.Repeat([]byte{0xaa}, 32)},
	{DeviceID: "6f1c2a3b-0000-4000-8000-00000000000b", PublicKey: bytes.Repeat([]byte{0xbb}, 32)},
}}

// TestDirectory: a signed directory opens with the account's identity key
// only, in its one encoding; damage, another key and contents that break a
// rule are refused.
func TestDirectory(t *testing.T) {
	id := IdentitySeed{1}.Identity()
	b, err := SignDirectory(testDirectory, id)
	if err != nil {
		t.Fatal(err)
	}
	got, err := OpenDirectory(b, id.PublicKey())
	if err != nil || got.Version != 2 || got.UserID != testDirectory.UserID || len(got.Devices) != 2 ||
		!bytes.Equal(got.Devices[1].PublicKey, testDirectory.Devices[1].PublicKey) {
		t.Fatalf("opened %+v, %v", got, err)
	}
	if _, err := OpenDirectory(b, IdentitySeed{2}.Identity().PublicKey()); !errors.Is(err, ErrAuth) {
		t.Fatalf("another identity key: %v, want ErrAuth", err)
	}
	// A device key changed after signing (byte 0xaa is only in keys).
	bad := bytes.Replace(b, bytes.Repeat([]byte{0xaa}, 32), bytes.Repeat([]byte{0xcc}, 32), 1)
	if _, err := OpenDirectory(bad, id.PublicKey()); !errors.Is(err, ErrAuth) {
		t.Fatalf("a device key swapped: %v, want ErrAuth", err)
	}
	if _, err := OpenDirectory(append(b, 0), id.PublicKey()); !errors.Is(err, ErrMalformed) {
		t.Fatalf("trailing byte: %v", err)
	}
	empty, err := SignDirectory(Directory{Version: 1, UserID: testDirectory.UserID}, id)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := OpenDirectory(empty, id.PublicKey()); err != nil || len(d.Devices) != 0 {
		t.Fatalf("a directory of no device: %+v, %v", d, err)
	}
	for name, d := range map[string]Directory{
		"version 0":     {Version: 0, UserID: testDirectory.UserID, Devices: []DirectoryDevice{}},
		"user id":       {Version: 1, UserID: "nobody", Devices: []DirectoryDevice{}},
		"short key":     {Version: 1, UserID: testDirectory.UserID, Devices: []DirectoryDevice{{DeviceID: testDirectory.Devices[0].DeviceID, PublicKey: []byte{1}}}},
		"device twice":  {Version: 1, UserID: testDirectory.UserID, Devices: []DirectoryDevice{testDirectory.Devices[0], testDirectory.Devices[0]}},
		"bad device id": {Version: 1, UserID: testDirectory.UserID, Devices: []DirectoryDevice{{DeviceID: "x", PublicKey: make([]byte, 32)}}},
	} {
		if _, err := SignDirectory(d, id); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

// FuzzDirectory: what OpenDirectory accepts is signed by the key and
// re-signs to a directory of the same content.
func FuzzDirectory(f *testing.F) {
	id := IdentitySeed{1}.Identity()
	b, _ := SignDirectory(testDirectory, id)
	f.Add(b)
	f.Add(b[:len(b)-1])
	f.Add([]byte{0xa1, 0x71})
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := OpenDirectory(b, id.PublicKey())
		if err != nil {
			return
		}
		if d.check() != nil {
			t.Fatalf("accepted a directory that breaks a rule: %+v", d)
		}
	})
}
