package sealed

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"

	"sealbox/server/hybridsig"
	"sealbox/server/servertest"
)

// TestServerAcceptsSealedBytes walks a client's life against a real server:
// escrow, identity key, album, blobs, a create and a replace op with their
// manifests and metadata blobs, a passphrase-protected share link read as a
// viewer would (a byte range included), and the revoke-all proof. Each step
// checks that sealbox accepts what this package writes, byte for byte.
func TestServerAcceptsSealedBytes(t *testing.T) {
	ts := servertest.MustOpenServer(t)
	c := ts.Client
	tok := c.Register(t, "format@example.com").Access
	userID := c.UserID(t, tok)
	secrets := AccountSecrets{Master: NewMasterKey(), Identity: NewIdentitySeed()}
	id := secrets.Identity.Identity()

	// Escrow: stored and returned byte for byte, and it opens.
	// The escrow's passphrase is not the sign-in password: the server sees
	// that one at every sign-in.
	escrow, err := NewEscrow(secrets, "encryption passphrase", NewRecoveryKey(), testArgon2)
	if err != nil {
		t.Fatal(err)
	}
	c.Do(t, servertest.Req{Method: "PUT", Path: "/v1/auth/escrow", Token: tok, Body: escrow, ContentType: "application/octet-stream"}).WantStatus(t, 200)
	got := c.Do(t, servertest.Req{Method: "GET", Path: "/v1/auth/escrow", Token: tok}).WantStatus(t, 200).Body
	if s, err := OpenEscrowWithPassphrase(got, "encryption passphrase"); err != nil || s != secrets {
		t.Fatalf("escrow read back does not open: %v", err)
	}

	// The identity key is what the directory pins.
	dir, _ := cbor.Marshal(map[string]any{"directory_version": 1})
	c.Do(t, servertest.Req{Method: "POST", Path: "/v1/auth/devices/directory", Token: tok, Body: dir, ContentType: "application/cbor",
		Header: map[string]string{"X-Service-Identity-Key": base64.StdEncoding.EncodeToString(id.PublicKey())}}).WantStatus(t, 200)

	albumID := "5d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6"
	r := c.Do(t, servertest.Req{Method: "POST", Path: "/v1/albums", Token: tok, Body: map[string]any{"album_id": albumID}}).WantStatus(t, 201)
	protocol := r.JSON(t)["protocol_version"].(string)
	upload := c.OpenUpload(t, tok, albumID)
	put := func(b []byte) string {
		c.PutBlob(t, tok, upload, b).WantStatus(t, 201)
		return servertest.HashOf(b)
	}
	albumKey := NewAlbumKey()
	wrappedAlbumKey, err := secrets.Master.WrapAlbumKey(albumID, 0, albumKey)
	if err != nil {
		t.Fatal(err)
	}
	op := func(m *Manifest, meta []byte) []byte {
		t.Helper()
		b, err := m.Sign(id)
		if err != nil {
			t.Fatal(err)
		}
		body := map[string]any{"manifest_envelope": m.Envelope(), "manifest_cbor": base64.StdEncoding.EncodeToString(b),
			"metadata_blob": base64.StdEncoding.EncodeToString(meta)}
		c.Do(t, servertest.Req{Method: "POST", Path: "/v1/albums/" + albumID + "/ops", Token: tok, Body: body}).WantStatus(t, 200)
		return b
	}
	asset := func(fileID string, k AssetKey, plain []byte) (original string, meta []byte, m *Metadata) {
		t.Helper()
		original = put(sealBytes(k.BlobKey(RoleOriginal), plain, randomSalt()))
		thumb := put(sealBytes(k.BlobKey(RoleThumbnail), plain[:100], randomSalt()))
		h := NewContentHMAC(secrets.Master)
		h.Write(plain)
		m = &Metadata{Name: "IMG_1.jpg", MediaType: "image/jpeg", Size: int64(len(plain)),
			Blobs:       map[Role]BlobRef{RoleOriginal: {original, int64(len(plain))}, RoleThumbnail: {thumb, 100}},
			ContentHMAC: hex.EncodeToString(h.Sum(nil))}
		meta, err := SealMetadata(k, m)
		if err != nil {
			t.Fatal(err)
		}
		return original, meta, m
	}

	// Create, key_mode derived.
	fileID := "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"
	derived, _ := albumKey.DeriveAssetKey(fileID)
	plain := plainRule(3*ChunkSize + 999)
	original, meta, _ := asset(fileID, derived, plain)
	m := &Manifest{ProtocolVersion: protocol, AlbumID: albumID, FileID: fileID, CiphertextHash: original,
		PlaintextSize: int64(len(plain)), KeyMode: "derived", MetadataBlobHash: servertest.HashOf(meta),
		CreatedByUser: userID, CreatedByDevice: vecDeviceID, ClientVersion: "sealed-test",
		Timestamp: "2026-11-27T10:00:00Z", Action: "create", AlbumKey: wrappedAlbumKey}
	created := op(m, meta)

	// Replace, key_mode wrapped, continuing the chain.
	assetKey := NewAssetKey()
	wrappedAssetKey, _ := albumKey.WrapAssetKey(albumID, fileID, assetKey)
	plain = plainRule(2*ChunkSize + 5)
	original, meta, _ = asset(fileID, assetKey, plain)
	m = &Manifest{ProtocolVersion: protocol, AlbumID: albumID, FileID: fileID, CiphertextHash: original,
		PlaintextSize: int64(len(plain)), KeyMode: "wrapped", MetadataBlobHash: servertest.HashOf(meta),
		OriginalBlobHash: original, CreatedByUser: userID, CreatedByDevice: vecDeviceID,
		ClientVersion: "sealed-test", Timestamp: "2026-11-27T10:05:00+01:00", Action: "replace",
		PriorProvenanceHash: ManifestHash(created), AlbumKey: wrappedAlbumKey, AssetKey: wrappedAssetKey,
		RetentionUntil: "2030-01-01T00:00:00Z"}
	replaced := op(m, meta)
	feed := c.Do(t, servertest.Req{Method: "GET", Path: "/v1/albums/" + albumID + "/feed", Token: tok}).WantStatus(t, 200).Body
	if !bytes.Contains(feed, []byte(ManifestHash(replaced))) {
		t.Errorf("the feed does not name the replace's manifest hash: %s", feed)
	}

	// A passphrase-protected share link.
	secret := NewLinkSecret()
	linkKey, wrapped, err := WrapLinkKey(secret, "passphrase", 1000)
	if err != nil {
		t.Fatal(err)
	}
	index, _ := SealShareIndex(linkKey, &ShareIndex{Items: []ShareItem{{AssetKey: assetKey, FileID: fileID, MetadataHash: servertest.HashOf(meta)}}})
	indexHash := put(index)
	opaque := strings.Repeat("5a", 16)
	c.Do(t, servertest.Req{Method: "POST", Path: "/v1/shares", Token: tok, Body: map[string]any{
		"opaque_id": opaque, "metadata_hash": indexHash, "serves": []string{indexHash, servertest.HashOf(meta), original},
		"wrapped_secret": base64.StdEncoding.EncodeToString(wrapped)}}).WantStatus(t, 201)

	// The viewer: fragment and passphrase in, plaintext range out.
	viewer := servertest.Client{BaseURL: c.BaseURL}
	fragment := secret.Fragment()
	s, err := ParseFragment(fragment)
	if err != nil {
		t.Fatal(err)
	}
	blob := func(hash string, rangeHeader string) []byte {
		req := servertest.Req{Method: "GET", Path: "/s/" + opaque + "/blob/" + hash}
		want := 200
		if rangeHeader != "" {
			req.Header, want = map[string]string{"Range": rangeHeader}, 206
		}
		return viewer.Do(t, req).WantStatus(t, want).Body
	}
	ws := viewer.Do(t, servertest.Req{Method: "GET", Path: "/s/" + opaque + "/wrapped-secret"}).WantStatus(t, 200).Body
	k, err := OpenWrappedSecret(ws, s, "passphrase")
	if err != nil {
		t.Fatal(err)
	}
	idx, err := OpenShareIndex(k, blob(indexHash, ""))
	if err != nil || len(idx.Items) != 1 {
		t.Fatalf("share index: %v", err)
	}
	md, err := OpenMetadata(idx.Items[0].AssetKey, blob(idx.Items[0].MetadataHash, ""))
	if err != nil {
		t.Fatal(err)
	}
	ref := md.Blobs[RoleOriginal]
	off, n := int64(ChunkSize-10), int64(30)
	spanOff, spanLen := CiphertextSpan(ref.Size, off, n)
	header := blob(ref.Hash, "bytes=0-24")
	span := blob(ref.Hash, fmt.Sprintf("bytes=%d-%d", spanOff, spanOff+spanLen-1))
	sparse := make([]byte, SealedSize(ref.Size)) // only the header and the span are filled in
	copy(sparse, header)
	copy(sparse[spanOff:], span)
	ra, err := NewReaderAt(idx.Items[0].AssetKey.BlobKey(RoleOriginal), &spanOnly{t: t, b: sparse, off: spanOff, n: spanLen}, int64(len(sparse)))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, n)
	if _, err := ra.ReadAt(out, off); err != nil || !bytes.Equal(out, plain[off:off+n]) {
		t.Errorf("range from the share's Range answers: %v", err)
	}

	// Revoke-all with the identity key the escrow holds.
	ch := c.Do(t, servertest.Req{Method: "POST", Path: "/v1/auth/logout/all/challenge", Token: tok}).WantStatus(t, 200).JSON(t)["challenge"].(string)
	proof := base64.StdEncoding.EncodeToString(id.Sign(hybridsig.RevokeAllSigningBytes(userID, ch)))
	c.Do(t, servertest.Req{Method: "POST", Path: "/v1/auth/logout/all", Body: map[string]any{"challenge": ch, "proof": proof}}).WantStatus(t, http.StatusOK)
}
