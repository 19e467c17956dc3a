package sealed

import (
	"errors"
	"testing"
)

// TestWrappedKeysBindTheirContext: a wrapped key opens only under its
// parent key and for the album, epoch and asset it was wrapped for.
func TestWrappedKeysBindTheirContext(t *testing.T) {
	mk, ak, asset := NewMasterKey(), NewAlbumKey(), NewAssetKey()
	wa, err := mk.WrapAlbumKey(vecAlbumID, 4, ak)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := mk.UnwrapAlbumKey(vecAlbumID, 4, wa); err != nil || got != ak {
		t.Fatalf("album key round trip: %v", err)
	}
	ws, err := ak.WrapAssetKey(vecAlbumID, vecFileID, asset)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ak.UnwrapAssetKey(vecAlbumID, vecFileID, ws); err != nil || got != asset {
		t.Fatalf("asset key round trip: %v", err)
	}
	flipped := append([]byte(nil), wa...)
	flipped[20] ^= 1
	other := "00000000-0000-4000-8000-000000000000"
	for name, f := range map[string]func() error{
		"another master key": func() error { _, err := NewMasterKey().UnwrapAlbumKey(vecAlbumID, 4, wa); return err },
		"another epoch":      func() error { _, err := mk.UnwrapAlbumKey(vecAlbumID, 5, wa); return err },
		"another album":      func() error { _, err := mk.UnwrapAlbumKey(other, 4, wa); return err },
		"a flipped bit":      func() error { _, err := mk.UnwrapAlbumKey(vecAlbumID, 4, flipped); return err },
		"another asset":      func() error { _, err := ak.UnwrapAssetKey(vecAlbumID, other, ws); return err },
		"an album key as an asset key": func() error {
			_, err := ak.UnwrapAssetKey(vecAlbumID, vecFileID, wa)
			return err
		},
	} {
		if err := f(); !errors.Is(err, ErrAuth) {
			t.Errorf("unwrap with %s: %v, want ErrAuth", name, err)
		}
	}
	for name, b := range map[string][]byte{"truncated": wa[:64], "extended": append(wa, 0), "version 3": append([]byte("SBXK\x03"), wa[5:]...)} {
		if _, err := mk.UnwrapAlbumKey(vecAlbumID, 4, b); err == nil || errors.Is(err, ErrAuth) {
			t.Errorf("unwrap of a %s wrapped key: %v, want a format error", name, err)
		}
	}
	if _, err := mk.WrapAlbumKey("0B9F6C1E-2A3D-4E5F-8071-92A3B4C5D6E7", 0, ak); !errors.Is(err, ErrMalformed) {
		t.Errorf("uppercase album id: %v, want ErrMalformed", err)
	}
}

func TestDerivedKeysDiffer(t *testing.T) {
	ak := NewAlbumKey()
	a, _ := ak.DeriveAssetKey(vecFileID)
	b, _ := ak.DeriveAssetKey("00000000-0000-4000-8000-000000000000")
	if a == b {
		t.Error("two files derive the same asset key")
	}
	seen := map[BlobKey]Role{}
	for _, r := range []Role{RoleOriginal, RoleThumbnail, RolePreview, RoleMetadata} {
		k := a.BlobKey(r)
		if prev, ok := seen[k]; ok {
			t.Errorf("roles %s and %s share a key", prev, r)
		}
		seen[k] = r
	}
}
