package server_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"sealbox/server"
	"sealbox/server/servertest"
)

// The album of an op fixture is pinned to opPin, older than the server's
// protocol-max, so a manifest can be inside the server's range and still not
// the album's protocol.
const opPin = "2026-01-01"

// opFixture is an account with an album and two blobs it holds (uploaded
// through a session on another album, so the op album has no session in
// flight).
type opFixture struct {
	ts         *TestServer
	tok        Tokens
	email      string
	userID     string
	album      string
	ciphertext string
	original   string
}

func newOpFixture(tb testing.TB, edit ...func(*server.Config)) *opFixture {
	tb.Helper()
	ts := MustOpenServer(tb, append([]func(*server.Config){func(c *server.Config) { c.AlbumProtocol = opPin }}, edit...)...)
	return newOpAccount(tb, ts, "owner@example.org")
}

func newOpAccount(tb testing.TB, ts *TestServer, email string) *opFixture {
	tb.Helper()
	tok := ts.Register(tb, email)
	return &opFixture{
		ts: ts, tok: tok, email: email, userID: ts.UserID(tb, tok.Access), album: ts.NewAlbum(tb, tok.Access),
		ciphertext: ts.Upload(tb, tok.Access, []byte("sealed original of "+email)),
		original:   ts.Upload(tb, tok.Access, []byte("sealed original, other role, of "+email)),
	}
}

var opSeq sync.Mutex
var opCounter int

// uniq makes manifests and metadata blobs differ between ops.
func uniq() string {
	opSeq.Lock()
	defer opSeq.Unlock()
	opCounter++
	return fmt.Sprint(opCounter)
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// createBody is a valid create of asset with a fresh manifest and metadata
// blob.
func (f *opFixture) createBody(asset string) map[string]any {
	n := uniq()
	metadata := []byte("sealed metadata " + n)
	env := map[string]any{
		"crypto_suite_id": 1, "protocol_version": opPin, "album_id": f.album, "file_id": asset,
		"amk_version": 0, "ciphertext_hash": f.ciphertext, "plaintext_size": 1234, "chunk_size": 65536,
		"key_mode": "derived", "metadata_blob_hash": servertest.HashOf(metadata),
		"created_by_user": f.userID, "created_by_device": "7d1c2b9e-3d4a-4e5f-8a7b-1c2d3e4f5a6b",
		"client_version": "sealbox-test/1.0", "timestamp": "2026-11-22T10:00:00Z", "action": "create",
	}
	return map[string]any{
		"manifest_envelope": env,
		"manifest_cbor":     b64([]byte("\xa1\x61n" + "signed manifest " + n)),
		"metadata_blob":     b64(metadata),
	}
}

// replaceBody is a valid replace of asset continuing from prior.
func (f *opFixture) replaceBody(asset, prior string) map[string]any {
	body := f.createBody(asset)
	env := body["manifest_envelope"].(map[string]any)
	env["action"] = "replace"
	env["prior_provenance_hash"] = prior
	env["original_blob_hash"] = f.original
	return body
}

func manifestHash(body map[string]any) string {
	raw, _ := base64.StdEncoding.DecodeString(body["manifest_cbor"].(string))
	return servertest.HashOf(raw)
}

// createAsset creates asset with a fresh op and returns its chain head.
func (f *opFixture) createAsset(tb testing.TB, asset string) string {
	tb.Helper()
	create := f.createBody(asset)
	f.op(tb, create).WantStatus(tb, http.StatusOK)
	return manifestHash(create)
}

// edited is a create of assetA as createBody makes it, changed by edit.
func (f *opFixture) edited(edit func(body map[string]any)) map[string]any {
	b := f.createBody(assetA)
	edit(b)
	return b
}

func (f *opFixture) op(tb testing.TB, body any) *Response {
	tb.Helper()
	return f.ts.Do(tb, Req{Method: "POST", Path: "/v1/albums/" + f.album + "/ops", Token: f.tok.Access, Body: body})
}

// opState is what an op writes: blob files, the feed and the album's
// sync_seq.
type opState struct {
	files   []string
	feed    string
	syncSeq any
}

func (f *opFixture) state(tb testing.TB) opState {
	tb.Helper()
	files := blobFiles(tb, f.ts)
	slices.Sort(files)
	feed := f.ts.Do(tb, Req{Method: "GET", Path: "/v1/albums/" + f.album + "/feed", Token: f.tok.Access}).WantStatus(tb, http.StatusOK)
	var seq any
	list := f.ts.Do(tb, Req{Method: "GET", Path: "/v1/albums", Token: f.tok.Access}).WantStatus(tb, http.StatusOK).JSON(tb)
	for _, a := range list["albums"].([]any) {
		if a := a.(map[string]any); a["album_id"] == f.album {
			seq = a["sync_seq"]
		}
	}
	return opState{files: files, feed: string(feed.Body), syncSeq: seq}
}

func (f *opFixture) wantUnchanged(tb testing.TB, before opState) {
	tb.Helper()
	after := f.state(tb)
	if !reflect.DeepEqual(before.files, after.files) {
		tb.Fatalf("blob files changed:\nbefore %v\nafter  %v", before.files, after.files)
	}
	if before.feed != after.feed {
		tb.Fatalf("feed changed:\nbefore %s\nafter  %s", before.feed, after.feed)
	}
	if before.syncSeq != after.syncSeq {
		tb.Fatalf("sync_seq changed: %v -> %v", before.syncSeq, after.syncSeq)
	}
}

const assetA = "a55e7000-0000-4000-8000-000000000001"

func TestOpCreateAndReplace(t *testing.T) {
	f := newOpFixture(t)
	create := f.createBody(assetA)
	r := f.op(t, create).WantStatus(t, http.StatusOK)
	if got, want := string(r.Body), `{"asset_id":"`+assetA+`","sync_seq":1,"action":"create","replayed":false}`; got != want {
		t.Fatalf("create: got %s, want %s", got, want)
	}
	replace := f.replaceBody(assetA, manifestHash(create))
	r = f.op(t, replace).WantStatus(t, http.StatusOK)
	if got, want := string(r.Body), `{"asset_id":"`+assetA+`","sync_seq":2,"action":"replace","replayed":false}`; got != want {
		t.Fatalf("replace: got %s, want %s", got, want)
	}
	// The manifest is stored verbatim as a blob, and it and the metadata
	// blob are held by the caller (a share link may serve them).
	for _, body := range []map[string]any{create, replace} {
		raw, _ := base64.StdEncoding.DecodeString(body["manifest_cbor"].(string))
		meta, _ := base64.StdEncoding.DecodeString(body["metadata_blob"].(string))
		for _, b := range [][]byte{raw, meta} {
			if data, _ := f.ts.StoredBlob(t, servertest.HashOf(b)); !bytes.Equal(data, b) {
				t.Fatalf("blob %s stored as %q", servertest.HashOf(b), data)
			}
			if held, _ := f.ts.Store.Holds(f.userID, servertest.HashOf(b)); !held {
				t.Fatalf("blob %s not held by the caller", servertest.HashOf(b))
			}
		}
	}
	if got := f.state(t).syncSeq; got != float64(2) {
		t.Fatalf("album sync_seq: got %v, want 2", got)
	}
	// An upper-case file_id names the same asset.
	again := f.replaceBody(strings.ToUpper(assetA), manifestHash(replace))
	f.op(t, again).WantStatus(t, http.StatusOK)
}

// TestOpBattery: one case per step of server/PROTOCOL.md §9's battery (and the album
// check); each refusal has its status and code and writes nothing.
func TestOpBattery(t *testing.T) {
	f := newOpFixture(t)
	bob := newOpAccount(t, f.ts, "bob@example.org")
	env := func(edit func(env map[string]any)) func(map[string]any) {
		return func(body map[string]any) { edit(body["manifest_envelope"].(map[string]any)) }
	}
	set := func(k string, v any) func(map[string]any) { return env(func(e map[string]any) { e[k] = v }) }
	del := func(k string) func(map[string]any) { return env(func(e map[string]any) { delete(e, k) }) }
	cases := []servertest.Scenario{
		// Step 1: strict JSON.
		{Name: "1 not JSON", Body: "{", WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "1 not an object", Body: "[]", WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "1 trailing data", Body: `{} {}`, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "1 unknown key", Body: f.edited(func(b map[string]any) { b["extra"] = 1 }), WantStatus: 400, WantCode: "error.request.malformed", WantField: "extra"},
		{Name: "1 unknown envelope key", Body: f.edited(set("caption", "x")), WantStatus: 400, WantCode: "error.request.malformed", WantField: "manifest_envelope.caption"},
		{Name: "1 envelope key in another case", Body: f.edited(func(b map[string]any) {
			e := b["manifest_envelope"].(map[string]any)
			e["ACTION"] = e["action"]
			delete(e, "action")
		}), WantStatus: 400, WantCode: "error.request.malformed", WantField: "manifest_envelope.ACTION"},
		{Name: "1 top-level key in another case", Body: f.edited(func(b map[string]any) { b["Manifest_CBOR"] = b["manifest_cbor"]; delete(b, "manifest_cbor") }), WantStatus: 400, WantCode: "error.request.malformed", WantField: "Manifest_CBOR"},
		{Name: "1 wrong type", Body: f.edited(set("crypto_suite_id", "1")), WantStatus: 400, WantCode: "error.request.malformed", WantField: "manifest_envelope.crypto_suite_id"},
		{Name: "1 fractional integer", Body: f.edited(set("plaintext_size", 1.5)), WantStatus: 400, WantCode: "error.request.malformed", WantField: "manifest_envelope.plaintext_size"},
		{Name: "1 envelope not an object", Body: f.edited(func(b map[string]any) { b["manifest_envelope"] = "x" }), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "1 wrong media type", Body: `{}`, ContentType: "text/plain", WantStatus: 415, WantCode: "error.request.unsupported_media_type"},
		{Name: "1 no envelope", Body: f.edited(func(b map[string]any) { delete(b, "manifest_envelope") }), WantStatus: 422, WantCode: "error.request.invalid", WantField: "manifest_envelope"},
		{Name: "1 null manifest_cbor", Body: f.edited(func(b map[string]any) { b["manifest_cbor"] = nil }), WantStatus: 422, WantCode: "error.request.invalid", WantField: "manifest_cbor"},
		// Step 2: base64.
		{Name: "2 manifest not base64", Body: f.edited(func(b map[string]any) { b["manifest_cbor"] = "not base64!" }), WantStatus: 422, WantCode: "error.request.invalid", WantField: "manifest_cbor"},
		{Name: "2 manifest url alphabet", Body: f.edited(func(b map[string]any) { b["manifest_cbor"] = "-_8=" }), WantStatus: 422, WantCode: "error.request.invalid", WantField: "manifest_cbor"},
		{Name: "2 manifest empty", Body: f.edited(func(b map[string]any) { b["manifest_cbor"] = "" }), WantStatus: 422, WantCode: "error.request.invalid", WantField: "manifest_cbor"},
		{Name: "2 metadata not base64", Body: f.edited(func(b map[string]any) { b["metadata_blob"] = "%%" }), WantStatus: 422, WantCode: "error.request.invalid", WantField: "metadata_blob"},
		// Go's decoder skips line breaks; the text must be the bytes' one encoding.
		{Name: "2 manifest with a line break", Body: f.edited(func(b map[string]any) { b["manifest_cbor"] = "oWFu\r\nYQ==" }), WantStatus: 422, WantCode: "error.request.invalid", WantField: "manifest_cbor"},
		{Name: "2 metadata with a line break", Body: f.edited(func(b map[string]any) { b["metadata_blob"] = "bWV0\nYQ==" }), WantStatus: 422, WantCode: "error.request.invalid", WantField: "metadata_blob"},
		// Step 3: envelope rules.
		{Name: "3 album_id missing", Body: f.edited(del("album_id")), WantStatus: 422, WantCode: "error.request.invalid", WantField: "manifest_envelope.album_id"},
		{Name: "3 album_id null", Body: f.edited(set("album_id", nil)), WantStatus: 422, WantCode: "error.request.invalid", WantField: "manifest_envelope.album_id"},
		{Name: "3 album_id not the path's", Body: f.edited(set("album_id", bob.album)), WantStatus: 422, WantCode: "error.request.invalid", WantField: "manifest_envelope.album_id"},
		{Name: "3 action outside the set", Body: f.edited(set("action", "delete")), WantStatus: 400, WantCode: "error.request.malformed", WantField: "manifest_envelope.action"},
		{Name: "3 action wrong case", Body: f.edited(set("action", "Create")), WantStatus: 400, WantCode: "error.request.malformed", WantField: "manifest_envelope.action"},
		{Name: "3 key_mode outside the set", Body: f.edited(set("key_mode", "raw")), WantStatus: 400, WantCode: "error.request.malformed", WantField: "manifest_envelope.key_mode"},
		{Name: "3 action missing", Body: f.edited(del("action")), WantStatus: 422, WantCode: "error.request.invalid", WantField: "manifest_envelope.action"},
		{Name: "3 timestamp missing", Body: f.edited(del("timestamp")), WantStatus: 422, WantCode: "error.request.invalid", WantField: "manifest_envelope.timestamp"},
		{Name: "3 file_id not a UUID", Body: f.edited(set("file_id", "asset-1")), WantStatus: 422, WantCode: "error.request.invalid", WantField: "manifest_envelope.file_id"},
		{Name: "3 device not a UUID", Body: f.edited(set("created_by_device", "phone")), WantStatus: 422, WantCode: "error.request.invalid", WantField: "manifest_envelope.created_by_device"},
		{Name: "3 hash upper case", Body: f.edited(set("ciphertext_hash", strings.ToUpper(f.ciphertext))), WantStatus: 422, WantCode: "error.request.invalid", WantField: "manifest_envelope.ciphertext_hash"},
		{Name: "3 prior hash short", Body: f.edited(set("prior_provenance_hash", "abc")), WantStatus: 422, WantCode: "error.request.invalid", WantField: "manifest_envelope.prior_provenance_hash"},
		{Name: "3 crypto suite 0", Body: f.edited(set("crypto_suite_id", 0)), WantStatus: 422, WantCode: "error.request.invalid", WantField: "manifest_envelope.crypto_suite_id"},
		{Name: "3 amk_version negative", Body: f.edited(set("amk_version", -1)), WantStatus: 422, WantCode: "error.request.invalid", WantField: "manifest_envelope.amk_version"},
		{Name: "3 plaintext_size negative", Body: f.edited(set("plaintext_size", -1)), WantStatus: 422, WantCode: "error.request.invalid", WantField: "manifest_envelope.plaintext_size"},
		{Name: "3 chunk_size 0", Body: f.edited(set("chunk_size", 0)), WantStatus: 422, WantCode: "error.request.invalid", WantField: "manifest_envelope.chunk_size"},
		{Name: "3 chunk_size over 16 MiB", Body: f.edited(set("chunk_size", 16<<20+1)), WantStatus: 422, WantCode: "error.request.invalid", WantField: "manifest_envelope.chunk_size"},
		{Name: "3 protocol not a date", Body: f.edited(set("protocol_version", "2026-1-01")), WantStatus: 422, WantCode: "error.request.invalid", WantField: "manifest_envelope.protocol_version"},
		{Name: "3 timestamp not RFC 3339", Body: f.edited(set("timestamp", "22/11/2026")), WantStatus: 422, WantCode: "error.request.invalid", WantField: "manifest_envelope.timestamp"},
		{Name: "3 retention not RFC 3339", Body: f.edited(set("retention_until", "soon")), WantStatus: 422, WantCode: "error.request.invalid", WantField: "manifest_envelope.retention_until"},
		{Name: "3 client_version empty", Body: f.edited(set("client_version", "")), WantStatus: 422, WantCode: "error.request.invalid", WantField: "manifest_envelope.client_version"},
		{Name: "3 client_version 129", Body: f.edited(set("client_version", strings.Repeat("v", 129))), WantStatus: 422, WantCode: "error.request.invalid", WantField: "manifest_envelope.client_version"},
		// Step 4: protocol.
		{Name: "4 protocol before the range", Body: f.edited(set("protocol_version", "2024-12-31")), WantStatus: 426, WantCode: "error.protocol.unsupported"},
		{Name: "4 protocol after the range", Body: f.edited(set("protocol_version", "2026-09-02")), WantStatus: 426, WantCode: "error.protocol.unsupported"},
		// The album check: unknown or another account's album.
		{Name: "unknown album", Path: "/v1/albums/" + "0f0e0d0c-0b0a-4908-8706-0504030201ff" + "/ops", Body: f.edited(set("album_id", "0f0e0d0c-0b0a-4908-8706-0504030201ff")), WantStatus: 403, WantCode: "error.album.forbidden"},
		{Name: "another account's album", Path: "/v1/albums/" + bob.album + "/ops", Body: f.edited(set("album_id", bob.album)), WantStatus: 403, WantCode: "error.album.forbidden"},
		{Name: "4 protocol not the album's pin", Body: f.edited(set("protocol_version", "2026-09-01")), WantStatus: 409, WantCode: "error.op.protocol_mismatch"},
		// Step 5: author.
		{Name: "5 foreign author", Body: f.edited(set("created_by_user", bob.userID)), WantStatus: 403, WantCode: "error.op.foreign_author"},
		// Step 6: metadata and original.
		{Name: "6 metadata blob without hash", Body: f.edited(del("metadata_blob_hash")), WantStatus: 422, WantCode: "error.op.metadata_mismatch"},
		{Name: "6 hash without metadata blob", Body: f.edited(func(b map[string]any) { delete(b, "metadata_blob") }), WantStatus: 422, WantCode: "error.op.metadata_mismatch"},
		{Name: "6 metadata blob hashes otherwise", Body: f.edited(func(b map[string]any) { b["metadata_blob"] = b64([]byte("other")) }), WantStatus: 422, WantCode: "error.op.metadata_mismatch"},
		{Name: "6 replace without original", Body: f.edited(env(func(e map[string]any) {
			e["action"], e["prior_provenance_hash"] = "replace", servertest.HashOf([]byte("x"))
		})), WantStatus: 422, WantCode: "error.request.invalid", WantField: "manifest_envelope.original_blob_hash"},
		// Step 7: blobs the caller holds.
		{Name: "7 ciphertext not held", Body: f.edited(set("ciphertext_hash", servertest.HashOf([]byte("never uploaded")))), WantStatus: 422, WantCode: "error.op.blob_missing", WantField: "manifest_envelope.ciphertext_hash"},
		{Name: "7 ciphertext held by another account", Body: f.edited(set("ciphertext_hash", bob.ciphertext)), WantStatus: 422, WantCode: "error.op.blob_missing", WantField: "manifest_envelope.ciphertext_hash"},
		{Name: "7 original not held", Body: f.edited(set("original_blob_hash", bob.original)), WantStatus: 422, WantCode: "error.op.blob_missing", WantField: "manifest_envelope.original_blob_hash"},
		// Step 9: the chain (step 8, replay, is an answer, not a refusal).
		{Name: "9 replace of a missing asset", Body: f.edited(env(func(e map[string]any) {
			e["action"], e["prior_provenance_hash"], e["original_blob_hash"] = "replace", servertest.HashOf([]byte("x")), f.original
		})), WantStatus: 409, WantCode: "error.op.stale_chain"},
	}
	for _, sc := range cases {
		sc.Method, sc.Token = "POST", f.tok.Access
		if sc.Path == "" {
			sc.Path = "/v1/albums/" + f.album + "/ops"
		}
		t.Run(sc.Name, func(t *testing.T) {
			before := f.state(t)
			r := f.ts.Do(t, sc.Req())
			p := sc.Check(t, r)
			switch sc.WantCode {
			case "error.protocol.unsupported":
				if p["protocol_min"] != f.ts.Config.ProtocolMin || p["protocol_max"] != f.ts.Config.ProtocolMax {
					t.Errorf("ProtocolRangeProblem members: %s", r.Body)
				}
			case "error.op.protocol_mismatch":
				if _, ok := p["chain_head"]; ok {
					t.Errorf("a protocol mismatch carries chain_head: %s", r.Body)
				}
			case "error.op.stale_chain":
				if v, ok := p["chain_head"]; !ok || v != nil {
					t.Errorf("a replace of a missing asset: chain_head must be null: %s", r.Body)
				}
			}
			f.wantUnchanged(t, before)
		})
	}
	f.ts.Do(t, Req{Method: "POST", Path: "/v1/albums/" + f.album + "/ops", Body: f.createBody(assetA)}).
		WantProblem(t, http.StatusUnauthorized, "error.auth.unauthenticated")
	f.ts.Do(t, Req{Method: "POST", Path: "/v1/albums/not-a-uuid/ops", Token: f.tok.Access, Body: f.createBody(assetA)}).
		WantProblem(t, http.StatusBadRequest, "error.request.malformed")
}

// The battery's order: a body failing several steps gets the first one's
// answer.
func TestOpBatteryOrder(t *testing.T) {
	f := newOpFixture(t)
	bob := newOpAccount(t, f.ts, "bob@example.org")
	body := f.createBody(assetA)
	env := body["manifest_envelope"].(map[string]any)
	env["created_by_user"] = bob.userID     // step 5
	env["ciphertext_hash"] = bob.ciphertext // step 7
	env["protocol_version"] = "2026-09-01"  // step 4
	f.op(t, body).WantProblem(t, http.StatusConflict, "error.op.protocol_mismatch")
	env["protocol_version"] = opPin
	f.op(t, body).WantProblem(t, http.StatusForbidden, "error.op.foreign_author")
	env["created_by_user"] = f.userID
	f.op(t, body).WantProblem(t, http.StatusUnprocessableEntity, "error.op.blob_missing")
	// The album check comes before the pin.
	env["protocol_version"] = "2026-09-01"
	env["album_id"] = bob.album
	f.ts.Do(t, Req{Method: "POST", Path: "/v1/albums/" + bob.album + "/ops", Token: f.tok.Access, Body: body}).
		WantProblem(t, http.StatusForbidden, "error.album.forbidden")
}

func TestOpReplay(t *testing.T) {
	f := newOpFixture(t)
	create := f.createBody(assetA)
	f.op(t, create).WantStatus(t, http.StatusOK)
	f.op(t, f.replaceBody(assetA, manifestHash(create))).WantStatus(t, http.StatusOK)
	before := f.state(t)
	r := f.op(t, create).WantStatus(t, http.StatusOK)
	if got, want := string(r.Body), `{"asset_id":"`+assetA+`","sync_seq":1,"action":"create","replayed":true}`; got != want {
		t.Fatalf("replay: got %s, want %s", got, want)
	}
	f.wantUnchanged(t, before)
}

func TestOpStaleChain(t *testing.T) {
	f := newOpFixture(t)
	head := f.createAsset(t, assetA)
	before := f.state(t)
	for _, tc := range []struct {
		name string
		body map[string]any
	}{
		{"create of an existing asset", f.createBody(assetA)},
		{"replace from a stale head", f.replaceBody(assetA, servertest.HashOf([]byte("an older head")))},
		{"replace with no prior", func() map[string]any {
			b := f.replaceBody(assetA, head)
			delete(b["manifest_envelope"].(map[string]any), "prior_provenance_hash")
			return b
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := f.op(t, tc.body).WantProblem(t, http.StatusConflict, "error.op.stale_chain")
			if p["chain_head"] != head {
				t.Fatalf("chain_head: got %v, want %s", p["chain_head"], head)
			}
			f.wantUnchanged(t, before)
		})
	}
}

// TestOpConcurrentReplaces: 16 replaces of one head at once; the chain's
// compare-and-set lets exactly one through, and sync_seq stays contiguous.
func TestOpConcurrentReplaces(t *testing.T) {
	f := newOpFixture(t)
	head := f.createAsset(t, assetA)
	const writers = 16
	bodies := make([]map[string]any, writers)
	for i := range bodies {
		bodies[i] = f.replaceBody(assetA, head)
	}
	statuses := make([]int, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() { statuses[i] = f.op(t, bodies[i]).Status })
	}
	wg.Wait()
	won := 0
	for _, st := range statuses {
		switch st {
		case http.StatusOK:
			won++
		case http.StatusConflict:
		default:
			t.Fatalf("status %d", st)
		}
	}
	if won != 1 {
		t.Fatalf("%d replaces of one head applied, want exactly 1 (%v)", won, statuses)
	}
	// More concurrent creates of distinct assets all apply, each with its own
	// sync_seq.
	for i := range writers {
		wg.Go(func() {
			f.op(t, f.createBody(fmt.Sprintf("a55e7000-0000-4000-8000-%012d", 100+i))).WantStatus(t, http.StatusOK)
		})
	}
	wg.Wait()
	feed := f.ts.Do(t, Req{Method: "GET", Path: "/v1/albums/" + f.album + "/feed", Token: f.tok.Access}).WantStatus(t, http.StatusOK).JSON(t)
	entries := feed["entries"].([]any)
	if len(entries) != 2+writers {
		t.Fatalf("%d feed entries, want %d", len(entries), 2+writers)
	}
	for i, e := range entries {
		if got := e.(map[string]any)["sync_seq"]; got != float64(i+1) {
			t.Fatalf("entry %d: sync_seq %v", i, got)
		}
	}
	if got := f.state(t).syncSeq; got != float64(2+writers) {
		t.Fatalf("album sync_seq %v", got)
	}
}

func TestOpQuota(t *testing.T) {
	f := newOpFixture(t)
	held, err := f.ts.Store.HeldBytes(f.userID)
	if err != nil {
		t.Fatal(err)
	}
	body := f.createBody(assetA)
	raw, _ := base64.StdEncoding.DecodeString(body["manifest_cbor"].(string))
	meta, _ := base64.StdEncoding.DecodeString(body["metadata_blob"].(string))
	newBytes := int64(len(raw) + len(meta))
	if err := f.ts.Store.SetQuota(f.email, held+newBytes-1); err != nil {
		t.Fatal(err)
	}
	before := f.state(t)
	f.op(t, body).WantProblem(t, http.StatusForbidden, "error.quota.exceeded")
	f.wantUnchanged(t, before)
	// Exactly at the quota is within it.
	if err := f.ts.Store.SetQuota(f.email, held+newBytes); err != nil {
		t.Fatal(err)
	}
	f.op(t, body).WantStatus(t, http.StatusOK)
	if got, _ := f.ts.Store.HeldBytes(f.userID); got != held+newBytes {
		t.Fatalf("held bytes: got %d, want %d", got, held+newBytes)
	}
	// A replay brings no new bytes: answered even at the quota.
	f.op(t, body).WantStatus(t, http.StatusOK)
}
