package sealed

import (
	"crypto/ecdh"
	"crypto/hpke"
)

// DeviceKey is a device's X25519 key for HPKE (FORMAT.md §10): the key a
// master key is sealed to when the device is linked.
type DeviceKey struct {
	priv hpke.PrivateKey
}

var deviceSealMagic = [4]byte{'S', 'B', 'X', 'D'}

// DeviceSealSize is the size of a master key sealed to a device: header (5),
// HPKE enc (32), AES-256-GCM of the key with its tag (48).
const DeviceSealSize = 5 + 32 + KeySize + tagSize

func suite() (hpke.KDF, hpke.AEAD) { return hpke.HKDFSHA256(), hpke.AES256GCM() }

// NewDeviceKey returns a new random device key.
func NewDeviceKey() (*DeviceKey, error) {
	k, err := hpke.DHKEM(ecdh.X25519()).GenerateKey()
	if err != nil {
		return nil, err
	}
	return &DeviceKey{priv: k}, nil
}

// ParseDeviceKey reads a device key from its 32 private bytes (RFC 9180
// SerializePrivateKey, as Bytes returns).
func ParseDeviceKey(b []byte) (*DeviceKey, error) {
	k, err := hpke.DHKEM(ecdh.X25519()).NewPrivateKey(b)
	if err != nil {
		return nil, malformed("device key: %v", err)
	}
	return &DeviceKey{priv: k}, nil
}

// Bytes returns the 32 private bytes, for the client's state directory.
func (d *DeviceKey) Bytes() []byte {
	b, err := d.priv.Bytes()
	if err != nil {
		panic("sealed: x25519 key bytes: " + err.Error())
	}
	return b
}

// PublicKey returns the 32-byte X25519 public key a directory publishes.
func (d *DeviceKey) PublicKey() []byte { return d.priv.PublicKey().Bytes() }

// SealMasterKeyToDevice seals mk to the device whose X25519 public key is pub
// (FORMAT.md §10): HPKE base mode, DHKEM(X25519, HKDF-SHA256), HKDF-SHA256,
// AES-256-GCM, info "sealbox/v1/device-seal:master-key", AAD the 5 header
// bytes.
func SealMasterKeyToDevice(pub []byte, mk MasterKey) ([]byte, error) {
	pk, err := hpke.DHKEM(ecdh.X25519()).NewPublicKey(pub)
	if err != nil {
		return nil, malformed("device public key: %v", err)
	}
	kdf, aead := suite()
	enc, s, err := hpke.NewSender(pk, kdf, aead, []byte(infoDeviceSeal))
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, DeviceSealSize)
	out = append(out, deviceSealMagic[:]...)
	out = append(out, 1)
	out = append(out, enc...)
	ct, err := s.Seal(out[:5], mk[:])
	if err != nil {
		return nil, err
	}
	return append(out, ct...), nil
}

// OpenMasterKey opens what SealMasterKeyToDevice sealed to d.
func (d *DeviceKey) OpenMasterKey(sealed []byte) (MasterKey, error) {
	if err := checkHeader(sealed, deviceSealMagic, "device seal"); err != nil {
		return MasterKey{}, err
	}
	if len(sealed) != DeviceSealSize {
		return MasterKey{}, malformed("device seal is %d bytes, not %d", len(sealed), DeviceSealSize)
	}
	kdf, aead := suite()
	r, err := hpke.NewRecipient(sealed[5:37], d.priv, kdf, aead, []byte(infoDeviceSeal))
	if err != nil {
		return MasterKey{}, ErrAuth
	}
	pt, err := r.Open(sealed[:5], sealed[37:])
	if err != nil {
		return MasterKey{}, ErrAuth
	}
	return MasterKey(pt), nil
}
