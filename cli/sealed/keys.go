package sealed

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"hash"
	"strconv"
)

// KeySize is the size of every symmetric key of the format: 32 bytes, an
// AES-256 key or HKDF input (FORMAT.md §2).
const KeySize = 32

// MasterKey is the account master key (FORMAT.md §3): 32 random bytes, never
// stored anywhere but sealed.
type MasterKey [KeySize]byte

// AlbumKey is the key of one album epoch (amk_version), wrapped under the
// master key (FORMAT.md §3).
type AlbumKey [KeySize]byte

// AssetKey is the key of one asset, random and wrapped (key_mode "wrapped")
// or derived from its album key (key_mode "derived") (FORMAT.md §3).
type AssetKey [KeySize]byte

// BlobKey is the key a stream is sealed under (FORMAT.md §4): an asset's role
// key, or a share link's index key.
type BlobKey [KeySize]byte

// Role is the part of an asset a blob holds (FORMAT.md §3).
type Role string

// The roles of an asset. Each has its own blob key.
const (
	RoleOriginal Role = "original"
	// RoleCompanion is an asset's second original: a Live Photo's video,
	// a RAW+JPEG pair's raw file (FORMAT.md §3.4).
	RoleCompanion Role = "companion"
	RoleThumbnail Role = "thumbnail"
	RolePreview   Role = "preview"
	RoleMetadata  Role = "metadata"
)

func (r Role) valid() bool {
	switch r {
	case RoleOriginal, RoleCompanion, RoleThumbnail, RolePreview, RoleMetadata:
		return true
	}
	return false
}

// HKDF info strings (FORMAT.md §2, table of labels). Every derivation names
// its purpose, so no two derive the same key.
const (
	infoAlbumWrap    = "sealbox/v1/wrap:album-key"
	infoAssetWrap    = "sealbox/v1/wrap:asset-key"
	infoIdentityWrap = "sealbox/v1/wrap:identity-seed"
	infoAssetKey     = "sealbox/v1/asset-key:" // + file_id
	infoRole         = "sealbox/v1/role:"      // + role
	infoContentHMAC  = "sealbox/v1/content-hmac"
	infoStream       = "sealbox/v1/stream"
	infoRecovery     = "sealbox/v1/escrow:recovery"
	infoSlotKey      = "sealbox/v1/escrow:slot-key"
	infoSlotCommit   = "sealbox/v1/escrow:slot-commit"
	infoShareKEK     = "sealbox/v1/share:passphrase-kek"
	infoShareIndex   = "sealbox/v1/share:index"
	infoDeviceSeal   = "sealbox/v1/device-seal:master-key"
)

// derive is HKDF-SHA256 with a 32-byte output, FORMAT.md §2.
func derive(secret, salt []byte, info string) [KeySize]byte {
	out, err := hkdf.Key(sha256.New, secret, salt, info, KeySize)
	if err != nil {
		panic("sealed: hkdf: " + err.Error()) // only for lengths HKDF cannot give
	}
	return [KeySize]byte(out)
}

func randomKey() [KeySize]byte {
	var k [KeySize]byte
	rand.Read(k[:])
	return k
}

// NewMasterKey returns a new random account master key.
func NewMasterKey() MasterKey { return MasterKey(randomKey()) }

// NewAlbumKey returns a new random album key, for a new album or epoch.
func NewAlbumKey() AlbumKey { return AlbumKey(randomKey()) }

// NewAssetKey returns a new random asset key, for key_mode "wrapped".
func NewAssetKey() AssetKey { return AssetKey(randomKey()) }

// DeriveAssetKey returns the asset key of fileID for key_mode "derived":
// HKDF-SHA256(album key, no salt, "sealbox/v1/asset-key:" || file_id).
func (k AlbumKey) DeriveAssetKey(fileID string) (AssetKey, error) {
	if !canonicalUUID(fileID) {
		return AssetKey{}, malformed("file_id %q is not a canonical lowercase UUID", fileID)
	}
	return AssetKey(derive(k[:], nil, infoAssetKey+fileID)), nil
}

// BlobKey returns the key the blob of role r is sealed under:
// HKDF-SHA256(asset key, no salt, "sealbox/v1/role:" || role).
func (k AssetKey) BlobKey(r Role) BlobKey {
	if !r.valid() {
		panic("sealed: unknown role " + strconv.Quote(string(r)))
	}
	return BlobKey(derive(k[:], nil, infoRole+string(r)))
}

// NewContentHMAC returns the keyed content hash of FORMAT.md §6
// (content_hmac): HMAC-SHA256 keyed with HKDF-SHA256(master key, no salt,
// "sealbox/v1/content-hmac"). Write an original's plaintext to it; its Sum,
// in lowercase hex, is the metadata's content_hmac.
func NewContentHMAC(mk MasterKey) hash.Hash {
	k := derive(mk[:], nil, infoContentHMAC)
	return hmac.New(sha256.New, k[:])
}

// WrapAlbumKey wraps ak under mk for album albumID, epoch amkVersion
// (FORMAT.md §3.2).
func (mk MasterKey) WrapAlbumKey(albumID string, amkVersion uint64, ak AlbumKey) ([]byte, error) {
	aad, err := albumKeyAAD(albumID, amkVersion)
	if err != nil {
		return nil, err
	}
	return wrapKey(derive(mk[:], nil, infoAlbumWrap), aad, ak, randomNonce()), nil
}

// UnwrapAlbumKey opens what WrapAlbumKey made; the album and epoch must be
// the ones it was wrapped for.
func (mk MasterKey) UnwrapAlbumKey(albumID string, amkVersion uint64, wrapped []byte) (AlbumKey, error) {
	aad, err := albumKeyAAD(albumID, amkVersion)
	if err != nil {
		return AlbumKey{}, err
	}
	k, err := unwrapKey(derive(mk[:], nil, infoAlbumWrap), aad, wrapped)
	return AlbumKey(k), err
}

// WrapAssetKey wraps an asset key (key_mode "wrapped") under its album key
// (FORMAT.md §3.3).
func (k AlbumKey) WrapAssetKey(albumID, fileID string, asset AssetKey) ([]byte, error) {
	aad, err := assetKeyAAD(albumID, fileID)
	if err != nil {
		return nil, err
	}
	return wrapKey(derive(k[:], nil, infoAssetWrap), aad, asset, randomNonce()), nil
}

// UnwrapAssetKey opens what WrapAssetKey made.
func (k AlbumKey) UnwrapAssetKey(albumID, fileID string, wrapped []byte) (AssetKey, error) {
	aad, err := assetKeyAAD(albumID, fileID)
	if err != nil {
		return AssetKey{}, err
	}
	a, err := unwrapKey(derive(k[:], nil, infoAssetWrap), aad, wrapped)
	return AssetKey(a), err
}

func albumKeyAAD(albumID string, amkVersion uint64) ([]byte, error) {
	if !canonicalUUID(albumID) {
		return nil, malformed("album_id %q is not a canonical lowercase UUID", albumID)
	}
	return []byte("sealbox/v1/album-key:" + albumID + ":" + strconv.FormatUint(amkVersion, 10)), nil
}

func assetKeyAAD(albumID, fileID string) ([]byte, error) {
	if !canonicalUUID(albumID) || !canonicalUUID(fileID) {
		return nil, malformed("album_id %q or file_id %q is not a canonical lowercase UUID", albumID, fileID)
	}
	return []byte("sealbox/v1/asset-key:" + albumID + ":" + fileID), nil
}

// Wrapped key layout (FORMAT.md §3.1): "SBXK", version 1, nonce (12),
// AES-256-GCM of the 32-byte key with its 16-byte tag = 65 bytes.
const wrappedKeySize = 4 + 1 + nonceSize + KeySize + tagSize

var wrappedKeyMagic = [4]byte{'S', 'B', 'X', 'K'}

const (
	nonceSize = 12
	tagSize   = 16
)

func randomNonce() [nonceSize]byte {
	var n [nonceSize]byte
	rand.Read(n[:])
	return n
}

func newGCM(key [KeySize]byte) cipher.AEAD {
	b, err := aes.NewCipher(key[:])
	if err != nil {
		panic("sealed: aes: " + err.Error()) // a 32-byte key is always valid
	}
	g, err := cipher.NewGCM(b)
	if err != nil {
		panic("sealed: gcm: " + err.Error())
	}
	return g
}

// wrapKey seals key under kek. The AAD is the 5 header bytes followed by aad.
func wrapKey[K ~[KeySize]byte](kek [KeySize]byte, aad []byte, key K, nonce [nonceSize]byte) []byte {
	out := make([]byte, 0, wrappedKeySize)
	out = append(out, wrappedKeyMagic[:]...)
	out = append(out, 1)
	out = append(out, nonce[:]...)
	full := append(out[:5:5], aad...)
	return newGCM(kek).Seal(out, nonce[:], key[:], full)
}

func unwrapKey(kek [KeySize]byte, aad, wrapped []byte) ([KeySize]byte, error) {
	if err := checkHeader(wrapped, wrappedKeyMagic, "wrapped key"); err != nil {
		return [KeySize]byte{}, err
	}
	if len(wrapped) != wrappedKeySize {
		return [KeySize]byte{}, malformed("wrapped key is %d bytes, not %d", len(wrapped), wrappedKeySize)
	}
	full := append(wrapped[:5:5], aad...)
	pt, err := newGCM(kek).Open(nil, wrapped[5:5+nonceSize], wrapped[5+nonceSize:], full)
	if err != nil {
		return [KeySize]byte{}, ErrAuth
	}
	return [KeySize]byte(pt), nil
}

// checkHeader checks a magic and a version byte of 1 at the start of b.
func checkHeader(b []byte, magic [4]byte, object string) error {
	if len(b) < 5 {
		return malformed("%s shorter than its header", object)
	}
	if [4]byte(b[:4]) != magic {
		return malformed("not a %s (magic %q)", object, b[:4])
	}
	if b[4] != 1 {
		return &VersionError{Object: object, Version: int(b[4])}
	}
	return nil
}

// canonicalUUID reports whether s is a UUID in canonical lowercase hyphenated
// form (8-4-4-4-12 lowercase hex digits), the only form the format writes.
func canonicalUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}
