package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"sealbox/server"
)

// tombstoneBody is a valid tombstone of asset, ending the chain at prior.
func (f *opFixture) tombstoneBody(asset, prior string) map[string]any {
	return map[string]any{
		"tombstone_envelope": map[string]any{
			"crypto_suite_id": 1, "protocol_version": opPin, "album_id": f.album, "file_id": asset,
			"created_by_user": f.userID, "created_by_device": "7d1c2b9e-3d4a-4e5f-8a7b-1c2d3e4f5a6b",
			"client_version": "sealbox-test/1.0", "timestamp": "2026-11-22T10:00:00Z", "prior_provenance_hash": prior,
		},
		"tombstone_cbor": b64([]byte("\xa1\x61t" + "signed tombstone " + uniq())),
	}
}

func (f *opFixture) tombstone(tb testing.TB, body any) *Response {
	tb.Helper()
	return f.ts.Do(tb, Req{Method: "POST", Path: "/v1/albums/" + f.album + "/tombstones", Token: f.tok.Access, Body: body})
}

func (f *opFixture) restore(tb testing.TB, asset string) *Response {
	tb.Helper()
	return f.ts.Do(tb, Req{Method: "POST", Path: "/v1/albums/" + f.album + "/assets/" + asset + "/restore", Token: f.tok.Access})
}

// The other photos of the trash tests (assetA is the ops tests').
const (
	trashB = "7a5e7000-0000-4000-8000-000000000002"
	trashC = "7a5e7000-0000-4000-8000-000000000003"
)

func tombstoneHash(body map[string]any) string {
	return manifestHash(map[string]any{"manifest_cbor": body["tombstone_cbor"]})
}

// TestDeletePhoto: a tombstone on its own route deletes a photo: the feed
// carries it as action delete, ops on the photo are 409 until its owner
// restores it, and "delete" stays no action of the op surface.
func TestDeletePhoto(t *testing.T) {
	f := newOpFixture(t)
	head := f.createAsset(t, assetA)
	// The op surface keeps its two actions.
	f.op(t, f.edited(func(b map[string]any) { b["manifest_envelope"].(map[string]any)["action"] = "delete" })).
		WantProblem(t, http.StatusBadRequest, "error.request.malformed")
	tomb := f.tombstoneBody(assetA, head)
	r := f.tombstone(t, tomb).WantStatus(t, http.StatusOK).JSON(t)
	if r["action"] != "delete" || r["asset_id"] != assetA || r["replayed"] != false || r["sync_seq"] != 2.0 {
		t.Fatalf("the tombstone's answer: %v", r)
	}
	if r := f.tombstone(t, tomb).WantStatus(t, http.StatusOK).JSON(t); r["replayed"] != true || r["sync_seq"] != 2.0 {
		t.Fatalf("the tombstone sent again: %v", r)
	}
	e := f.feed(t, "?after=1")["entries"].([]any)[0].(map[string]any)
	if e["action"] != "delete" || e["manifest_hash"] != tombstoneHash(tomb) || e["ciphertext_hash"] != f.ciphertext {
		t.Fatalf("the feed entry of the tombstone: %v", e)
	}
	f.op(t, f.replaceBody(assetA, tombstoneHash(tomb))).WantProblem(t, http.StatusConflict, "error.asset.deleted")
	f.tombstone(t, f.tombstoneBody(assetA, tombstoneHash(tomb))).WantProblem(t, http.StatusConflict, "error.asset.deleted")
	p := f.tombstone(t, f.tombstoneBody(assetA, head)).WantProblem(t, http.StatusConflict, "error.op.stale_chain")
	if p["chain_head"] != tombstoneHash(tomb) {
		t.Fatalf("chain_head: %v", p["chain_head"])
	}
	f.tombstone(t, f.tombstoneBody(trashB, head)).WantProblem(t, http.StatusConflict, "error.op.stale_chain")
	if r := f.restore(t, assetA).WantStatus(t, http.StatusOK).JSON(t); r["action"] != "restore" || r["sync_seq"] != 3.0 {
		t.Fatalf("restore: %v", r)
	}
	e = f.feed(t, "?after=2")["entries"].([]any)[0].(map[string]any)
	if e["action"] != "restore" || e["manifest_hash"] != head {
		t.Fatalf("the feed entry of the restore: %v", e)
	}
	f.restore(t, assetA).WantProblem(t, http.StatusNotFound, "error.asset.not_in_trash")
	f.op(t, f.replaceBody(assetA, head)).WantStatus(t, http.StatusOK)
}

// TestTombstoneBattery: the tombstone's refusals, each with its code.
func TestTombstoneBattery(t *testing.T) {
	f := newOpFixture(t)
	head := f.createAsset(t, assetA)
	other := newOpAccount(t, f.ts, "other@example.org")
	edit := func(change func(env map[string]any, body map[string]any)) map[string]any {
		b := f.tombstoneBody(assetA, head)
		change(b["tombstone_envelope"].(map[string]any), b)
		return b
	}
	for _, tc := range []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"an unknown member", edit(func(env, _ map[string]any) { env["action"] = "delete" }), 400, "error.request.malformed"},
		{"no envelope", edit(func(_, b map[string]any) { delete(b, "tombstone_envelope") }), 422, "error.request.invalid"},
		{"no bytes", edit(func(_, b map[string]any) { b["tombstone_cbor"] = "" }), 422, "error.request.invalid"},
		{"a line break in its base64", edit(func(_, b map[string]any) { b["tombstone_cbor"] = "oWFu\nYQ==" }), 422, "error.request.invalid"},
		{"another album", edit(func(env, _ map[string]any) { env["album_id"] = other.album }), 422, "error.request.invalid"},
		{"no prior", edit(func(env, _ map[string]any) { delete(env, "prior_provenance_hash") }), 422, "error.request.invalid"},
		{"a bad file id", edit(func(env, _ map[string]any) { env["file_id"] = "photo" }), 422, "error.request.invalid"},
		{"a protocol out of range", edit(func(env, _ map[string]any) { env["protocol_version"] = "2020-01-01" }), 426, "error.protocol.unsupported"},
		{"another protocol", edit(func(env, _ map[string]any) { env["protocol_version"] = "2026-09-01" }), 409, "error.op.protocol_mismatch"},
		{"another author", edit(func(env, _ map[string]any) { env["created_by_user"] = other.userID }), 403, "error.op.foreign_author"},
	} {
		t.Run(tc.name, func(t *testing.T) { f.tombstone(t, tc.body).WantProblem(t, tc.status, tc.code) })
	}
	// Another account's album is forbidden, as for ops.
	b := f.tombstoneBody(assetA, head)
	b["tombstone_envelope"].(map[string]any)["album_id"] = other.album
	f.ts.Do(t, Req{Method: "POST", Path: "/v1/albums/" + other.album + "/tombstones", Token: f.tok.Access, Body: b}).
		WantProblem(t, http.StatusForbidden, "error.album.forbidden")
	other.restore(t, assetA).WantProblem(t, http.StatusNotFound, "error.asset.not_in_trash")
	f.ts.Do(t, Req{Method: "POST", Path: "/v1/albums/" + f.album + "/assets/photo/restore", Token: f.tok.Access}).
		WantProblem(t, http.StatusBadRequest, "error.request.malformed")
}

// TestTrashWindow: a deleted photo stays restorable until --trash has
// passed; then its blobs are released (quota back) and a share link no
// longer serves them, while a blob another photo names stays.
func TestTrashWindow(t *testing.T) {
	f := newOpFixture(t, func(c *server.Config) { c.Trash = 48 * time.Hour })
	headA := f.createAsset(t, assetA)
	f.createAsset(t, trashB) // names the same ciphertext
	own := f.ts.Upload(t, f.tok.Access, []byte("another photo"))
	c := f.createBody(trashC)
	c["manifest_envelope"].(map[string]any)["ciphertext_hash"] = own
	f.op(t, c).WantStatus(t, http.StatusOK)
	link := strings.Repeat("3", 32)
	f.ts.Do(t, Req{Method: "POST", Path: "/v1/shares", Token: f.tok.Access, Body: map[string]any{
		"opaque_id": link, "metadata_hash": own, "serves": []string{own, f.ciphertext},
	}}).WantStatus(t, http.StatusCreated)
	f.tombstone(t, f.tombstoneBody(assetA, headA)).WantStatus(t, http.StatusOK)
	f.tombstone(t, f.tombstoneBody(trashC, manifestHash(c))).WantStatus(t, http.StatusOK)
	held, err := f.ts.Store.HeldBytes(f.userID)
	if err != nil {
		t.Fatal(err)
	}
	f.ts.Clock.Advance(48*time.Hour - time.Second)
	f.tok = f.ts.Login(t, f.email) // the access token expired meanwhile
	f.restore(t, assetA).WantStatus(t, http.StatusOK)
	f.ts.Clock.Advance(time.Second)
	f.restore(t, trashC).WantProblem(t, http.StatusNotFound, "error.asset.not_in_trash")
	if _, err := f.ts.Store.Sweep(); err != nil {
		t.Fatal(err)
	}
	if now, err := f.ts.Store.HeldBytes(f.userID); err != nil || now >= held {
		t.Fatalf("held after the purge: %d, before %d (%v)", now, held, err)
	}
	f.ts.Do(t, Req{Method: "GET", Path: "/s/" + link + "/blob/" + own}).WantProblem(t, http.StatusNotFound, "error.share.not_found")
	f.ts.Do(t, Req{Method: "GET", Path: "/s/" + link + "/blob/" + f.ciphertext}).WantStatus(t, http.StatusOK)
	f.ts.Do(t, Req{Method: "GET", Path: "/v1/blobs/" + own, Token: f.tok.Access}).WantProblem(t, http.StatusNotFound, "error.blob.not_found")
	f.op(t, f.replaceBody(assetA, headA)).WantStatus(t, http.StatusOK)
}

func (f *opFixture) albumTombstoneBody() map[string]any {
	body := f.tombstoneBody(assetA, "")
	env := body["tombstone_envelope"].(map[string]any)
	delete(env, "file_id")
	delete(env, "prior_provenance_hash")
	return body
}

// TestDeleteAlbum: DELETE /v1/albums/{id} with a signed tombstone deletes
// every photo of the album in one act and closes it to ops and uploads
// until its owner restores it; the album list shows it in the trash.
func TestDeleteAlbum(t *testing.T) {
	f := newOpFixture(t)
	f.createAsset(t, assetA)
	f.createAsset(t, trashB)
	del := func(body any) *Response {
		return f.ts.Do(t, Req{Method: "DELETE", Path: "/v1/albums/" + f.album, Token: f.tok.Access, Body: body})
	}
	tomb := f.albumTombstoneBody()
	if r := del(tomb).WantStatus(t, http.StatusOK).JSON(t); r["assets"] != 2.0 || r["sync_seq"] != 4.0 || r["replayed"] != false {
		t.Fatalf("the album's deletion: %v", r)
	}
	if r := del(tomb).WantStatus(t, http.StatusOK).JSON(t); r["replayed"] != true {
		t.Fatalf("the deletion sent again: %v", r)
	}
	del(f.albumTombstoneBody()).WantProblem(t, http.StatusConflict, "error.album.deleted")
	withFile := f.albumTombstoneBody()
	withFile["tombstone_envelope"].(map[string]any)["file_id"] = assetA
	del(withFile).WantProblem(t, http.StatusBadRequest, "error.request.malformed")
	albums := f.ts.Do(t, Req{Method: "GET", Path: "/v1/albums", Token: f.tok.Access}).WantStatus(t, http.StatusOK).JSON(t)["albums"].([]any)
	var mine map[string]any
	for _, a := range albums {
		if a.(map[string]any)["album_id"] == f.album {
			mine = a.(map[string]any)
		}
	}
	if mine["deleted_at"] != "2026-11-22T10:00:00Z" || mine["purge_at"] != "2026-12-22T10:00:00Z" {
		t.Fatalf("the deleted album in the list: %v", mine)
	}
	f.op(t, f.createBody(trashC)).WantProblem(t, http.StatusConflict, "error.album.deleted")
	f.ts.Do(t, Req{Method: "POST", Path: "/v1/albums/" + f.album + "/uploads", Token: f.tok.Access}).
		WantProblem(t, http.StatusConflict, "error.album.deleted")
	f.restore(t, assetA).WantProblem(t, http.StatusConflict, "error.album.deleted")
	restore := func() *Response {
		return f.ts.Do(t, Req{Method: "POST", Path: "/v1/albums/" + f.album + "/restore", Token: f.tok.Access})
	}
	if r := restore().WantStatus(t, http.StatusOK).JSON(t); r["assets"] != 2.0 || r["sync_seq"] != 6.0 {
		t.Fatalf("the album's restore: %v", r)
	}
	restore().WantProblem(t, http.StatusNotFound, "error.album.not_in_trash")
	f.op(t, f.createBody(trashC)).WantStatus(t, http.StatusOK)
}
