package sealed

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestDeviceSealRoundTrip(t *testing.T) {
	d, err := NewDeviceKey()
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseDeviceKey(d.Bytes())
	if err != nil || !bytes.Equal(again.PublicKey(), d.PublicKey()) {
		t.Fatalf("device key does not survive Bytes: %v", err)
	}
	mk := NewMasterKey()
	sealed, err := SealMasterKeyToDevice(d.PublicKey(), mk)
	if err != nil {
		t.Fatal(err)
	}
	if len(sealed) != DeviceSealSize {
		t.Errorf("device seal is %d bytes, want %d", len(sealed), DeviceSealSize)
	}
	if got, err := again.OpenMasterKey(sealed); err != nil || got != mk {
		t.Errorf("device seal does not open: %v", err)
	}
}

func TestDeviceSealRefusals(t *testing.T) {
	d, _ := NewDeviceKey()
	other, _ := NewDeviceKey()
	sealed, _ := SealMasterKeyToDevice(d.PublicKey(), NewMasterKey())
	if _, err := other.OpenMasterKey(sealed); !errors.Is(err, ErrAuth) {
		t.Errorf("another device: %v, want ErrAuth", err)
	}
	for i := 5; i < len(sealed); i++ {
		c := bytes.Clone(sealed)
		c[i] ^= 0x10
		if _, err := d.OpenMasterKey(c); err == nil {
			t.Errorf("byte %d flipped: opened", i)
		}
	}
	for name, b := range map[string][]byte{"truncated": sealed[:len(sealed)-1], "extended": append(bytes.Clone(sealed), 0), "empty": nil} {
		if _, err := d.OpenMasterKey(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	if _, err := d.OpenMasterKey(append([]byte("SBXD\x04"), sealed[5:]...)); err == nil || !strings.Contains(err.Error(), "device seal format version 4") {
		t.Errorf("version 4: %v, want an error naming it", err)
	}
	if _, err := SealMasterKeyToDevice(make([]byte, 31), NewMasterKey()); !errors.Is(err, ErrMalformed) {
		t.Errorf("a 31-byte public key: %v, want ErrMalformed", err)
	}
}
