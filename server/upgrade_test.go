package server_test

import (
	"bytes"
	"encoding/binary"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"

	"sealbox/server"
	"sealbox/server/servertest"
)

const (
	intentA = "1a7e0000-0000-4000-8000-00000000000a"
	intentB = "1a7e0000-0000-4000-8000-00000000000b"
	target  = "2026-09-01"
)

func intent(tb testing.TB, id, to string) []byte {
	tb.Helper()
	b, err := cbor.Marshal(map[string]any{"intent_id": id, "to_protocol_version": to, "proposer_note": []any{1, "kept verbatim"}})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func (f *opFixture) upgrade(tb testing.TB, method, suffix string, body []byte) *Response {
	tb.Helper()
	req := Req{Method: method, Path: "/v1/albums/" + f.album + "/upgrade" + suffix, Token: f.tok.Access}
	if body != nil {
		req.Body, req.ContentType = body, "application/cbor"
	}
	return f.ts.Do(tb, req)
}

func (f *opFixture) wantPhase(tb testing.TB, r *Response, want string) {
	tb.Helper()
	r.WantStatus(tb, http.StatusOK)
	if string(r.Body) != want {
		tb.Fatalf("phase:\ngot  %s\nwant %s", r.Body, want)
	}
}

func (f *opFixture) normalPhase(inFlight string) string {
	return `{"album_id":"` + f.album + `","in_flight":` + inFlight + `}`
}

func (f *opFixture) livePhase(id, expires, inFlight string) string {
	return `{"album_id":"` + f.album + `","intent_id":"` + id + `","to_protocol_version":"` + target +
		`","expires_at":"` + expires + `","in_flight":` + inFlight + `}`
}

func (f *opFixture) albumProtocol(tb testing.TB) any {
	tb.Helper()
	list := f.ts.Do(tb, Req{Method: "GET", Path: "/v1/albums", Token: f.tok.Access}).WantStatus(tb, http.StatusOK).JSON(tb)
	for _, a := range list["albums"].([]any) {
		if a := a.(map[string]any); a["album_id"] == f.album {
			return a["protocol_version"]
		}
	}
	tb.Fatal("album not listed")
	return nil
}

// TestUpgradeCeremony walks start, repeat, conflict, uploads refused, ops
// still applied, commit refused until quiescent, commit and re-pin.
func TestUpgradeCeremony(t *testing.T) {
	f := newOpFixture(t)
	f.wantPhase(t, f.upgrade(t, "GET", "", nil), f.normalPhase("0"))
	up := f.ts.OpenUpload(t, f.tok.Access, f.album)

	// Start: 200 with the phase; the window is 15 minutes on the server clock.
	live := f.livePhase(intentA, "2026-11-22T10:15:00Z", "1")
	f.wantPhase(t, f.upgrade(t, "POST", "", intent(t, intentA, target)), live)
	f.wantPhase(t, f.upgrade(t, "GET", "", nil), live)

	// The same intent again, later: the same phase, the window not moved.
	f.ts.Clock.Advance(time.Minute)
	f.wantPhase(t, f.upgrade(t, "POST", "", intent(t, intentA, target)), live)
	// Another intent: 409.
	f.upgrade(t, "POST", "", intent(t, intentB, target)).WantProblem(t, http.StatusConflict, "error.album.upgrade_in_flight")

	// No upload session opens while in flight; lifecycle ops still apply.
	f.ts.Do(t, Req{Method: "POST", Path: "/v1/albums/" + f.album + "/uploads", Token: f.tok.Access}).
		WantProblem(t, http.StatusConflict, "error.album.upgrade_in_flight")
	create := f.createBody(assetA)
	f.op(t, create).WantStatus(t, http.StatusOK)

	// Commit with a session still in flight: 409 not quiescent.
	tombstone := []byte("\xa1\x69tombstone\xf5")
	f.upgrade(t, "POST", "/commit?intent_id="+intentA, tombstone).WantProblem(t, http.StatusConflict, "error.upgrade.not_quiescent")
	f.ts.Do(t, Req{Method: "DELETE", Path: "/v1/uploads/" + up, Token: f.tok.Access}).WantStatus(t, http.StatusNoContent)
	f.wantPhase(t, f.upgrade(t, "GET", "", nil), f.livePhase(intentA, "2026-11-22T10:15:00Z", "0"))

	// Commit with another intent id, or without a ceremony: 409.
	f.upgrade(t, "POST", "/commit?intent_id="+intentB, tombstone).WantProblem(t, http.StatusConflict, "error.album.upgrade_in_flight")
	if got := f.albumProtocol(t); got != opPin {
		t.Fatalf("a refused commit re-pinned the album: %v", got)
	}
	// Commit: re-pinned, normal operation.
	f.wantPhase(t, f.upgrade(t, "POST", "/commit?intent_id="+intentA, tombstone), f.normalPhase("0"))
	if got := f.albumProtocol(t); got != target {
		t.Fatalf("album protocol after commit: got %v, want %s", got, target)
	}
	f.upgrade(t, "POST", "/commit?intent_id="+intentA, tombstone).WantProblem(t, http.StatusConflict, "error.album.upgrade_in_flight")
	// The same intent cannot start again: the album is at its target now.
	f.upgrade(t, "POST", "", intent(t, intentA, target)).WantProblem(t, http.StatusBadRequest, "error.upgrade.bad_target")

	// Uploads open again; ops must now carry the new protocol.
	f.ts.OpenUpload(t, f.tok.Access, f.album)
	old := f.replaceBody(assetA, manifestHash(create))
	f.op(t, old).WantProblem(t, http.StatusConflict, "error.op.protocol_mismatch")
	old["manifest_envelope"].(map[string]any)["protocol_version"] = target
	f.op(t, old).WantStatus(t, http.StatusOK)
}

func TestUpgradeAbort(t *testing.T) {
	f := newOpFixture(t)
	f.upgrade(t, "DELETE", "?intent_id="+intentA, nil).WantProblem(t, http.StatusConflict, "error.album.upgrade_in_flight")
	f.wantPhase(t, f.upgrade(t, "POST", "", intent(t, intentA, target)), f.livePhase(intentA, "2026-11-22T10:15:00Z", "0"))
	f.upgrade(t, "DELETE", "?intent_id="+intentB, nil).WantProblem(t, http.StatusConflict, "error.album.upgrade_in_flight")
	f.wantPhase(t, f.upgrade(t, "GET", "", nil), f.livePhase(intentA, "2026-11-22T10:15:00Z", "0"))
	f.wantPhase(t, f.upgrade(t, "DELETE", "?intent_id="+intentA, nil), f.normalPhase("0"))
	f.upgrade(t, "DELETE", "?intent_id="+intentA, nil).WantProblem(t, http.StatusConflict, "error.album.upgrade_in_flight")
	// The album is free: uploads open, another ceremony starts.
	f.ts.OpenUpload(t, f.tok.Access, f.album)
	f.wantPhase(t, f.upgrade(t, "POST", "", intent(t, intentB, target)), f.livePhase(intentB, "2026-11-22T10:15:00Z", "1"))
	if got := f.albumProtocol(t); got != opPin {
		t.Fatalf("abort changed the pin: %v", got)
	}
}

func TestUpgradeExpiry(t *testing.T) {
	f := newOpFixture(t, func(c *server.Config) { c.UpgradeWindow = 10 * time.Minute })
	f.wantPhase(t, f.upgrade(t, "POST", "", intent(t, intentA, target)), f.livePhase(intentA, "2026-11-22T10:10:00Z", "0"))
	f.ts.Clock.Advance(10*time.Minute - time.Second)
	f.upgrade(t, "POST", "", intent(t, intentB, target)).WantProblem(t, http.StatusConflict, "error.album.upgrade_in_flight")
	f.ts.Clock.Advance(time.Second)
	// The window has closed: normal operation at once, before any sweep.
	f.wantPhase(t, f.upgrade(t, "GET", "", nil), f.normalPhase("0"))
	f.upgrade(t, "POST", "/commit?intent_id="+intentA, []byte{0xf6}).WantProblem(t, http.StatusConflict, "error.album.upgrade_in_flight")
	f.upgrade(t, "DELETE", "?intent_id="+intentA, nil).WantProblem(t, http.StatusConflict, "error.album.upgrade_in_flight")
	f.ts.OpenUpload(t, f.tok.Access, f.album)
	if n, err := f.ts.Store.Sweep(); err != nil || n < 1 {
		t.Fatalf("sweep: %d, %v", n, err)
	}
	f.wantPhase(t, f.upgrade(t, "POST", "", intent(t, intentB, target)), f.livePhase(intentB, "2026-11-22T10:20:00Z", "1"))
	if got := f.albumProtocol(t); got != opPin {
		t.Fatalf("expiry changed the pin: %v", got)
	}
}

// TestUpgradeIntentOtherKeys: intent_id and to_protocol_version are matched
// exactly, and keys of any other type or spelling are allowed beside them
// and kept verbatim (server/PROTOCOL.md §9).
func TestUpgradeIntentOtherKeys(t *testing.T) {
	f := newOpFixture(t)
	const known = "\x69intent_id\x78\x24" + intentA + "\x73to_protocol_version\x6a" + target
	for _, tc := range []struct {
		name  string
		other string // encoded key/value pairs beside the known two
		pairs byte   // how many
	}{
		{"the keys in another case", "\x69INTENT_ID\x78\x24" + intentB + "\x73TO_PROTOCOL_VERSION\x6a2099-01-01", 2},
		{"byte string", "\x49intent_id\x78\x24" + intentB, 1},
		{"integers", "\x01\x02\x3b\xff\xff\xff\xff\xff\xff\xff\xff\x03", 2},
		{"null and undefined", "\xf6\x01\xf7\x02", 2},
		{"boolean and float", "\xf5\x01\xf9\x3c\x00\x02", 2},
		{"tagged", "\xd9\xd9\xf7\x69intent_id\x01\xc2\x41\x01\x02", 2},
		{"array and map", "\x81\x01\x01\xa1\x01\x02\x02", 2},
		{"a value 40 levels deep", "\x61d" + deepCBOR(40), 1},
		{"a value of 65,537 elements", "\x61n" + nulls(65537), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(string([]byte{0xa2 + tc.pairs}) + known + tc.other)
			f.wantPhase(t, f.upgrade(t, "POST", "", body), f.livePhase(intentA, "2026-11-22T10:15:00Z", "0"))
			if !snapshotHolds(t, f.ts, body) {
				t.Fatal("the intent is not stored verbatim")
			}
			f.wantPhase(t, f.upgrade(t, "DELETE", "?intent_id="+intentA, nil), f.normalPhase("0"))
		})
	}
}

// deepCBOR is a well-formed item nested depth arrays deep.
func deepCBOR(depth int) string { return strings.Repeat("\x81", depth) + "\x00" }

// nulls is a well-formed array of n nulls (n < 2^32).
func nulls(n int) string {
	return string(binary.BigEndian.AppendUint32([]byte{0x9a}, uint32(n))) + strings.Repeat("\xf6", n)
}

// TestUpgradeTombstoneAnyCBOR: the tombstone is any well-formed CBOR, stored
// verbatim (server/PROTOCOL.md §9), however deep or long, up to what the CBOR library
// can represent: 65,535 levels of nesting.
func TestUpgradeTombstoneAnyCBOR(t *testing.T) {
	f := newOpFixture(t)
	for _, tc := range []struct {
		name      string
		tombstone string
	}{
		{"40 levels deep", deepCBOR(40)},
		{"65,535 levels deep", deepCBOR(65535)},
		{"array of 65,537 nulls", nulls(65537)},
		{"map of 65,537 pairs", "\xba\x00\x01\x00\x01" + strings.Repeat("\x00\xf6", 65537)},
		{"duplicate keys", "\xa2\x01\x02\x01\x03"},
		{"text that is not UTF-8", "\x62\xff\xfe"},
		{"tag whose content does not suit it", "\xc1\x80"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := *f
			g.album = f.ts.NewAlbum(t, f.tok.Access)
			g.wantPhase(t, g.upgrade(t, "POST", "", intent(t, intentA, target)), g.livePhase(intentA, "2026-11-22T10:15:00Z", "0"))
			g.wantPhase(t, g.upgrade(t, "POST", "/commit?intent_id="+intentA, []byte(tc.tombstone)), g.normalPhase("0"))
			if got := g.albumProtocol(t); got != target {
				t.Fatalf("album protocol after commit: got %v, want %s", got, target)
			}
			if !snapshotHolds(t, f.ts, []byte(tc.tombstone)) {
				t.Fatal("the tombstone is not stored verbatim")
			}
		})
	}
	// Deeper than the library represents: refused, and the ceremony stays.
	f.wantPhase(t, f.upgrade(t, "POST", "", intent(t, intentA, target)), f.livePhase(intentA, "2026-11-22T10:15:00Z", "0"))
	f.upgrade(t, "POST", "/commit?intent_id="+intentA, []byte(deepCBOR(65536))).WantProblem(t, http.StatusBadRequest, "error.request.malformed")
	f.wantPhase(t, f.upgrade(t, "GET", "", nil), f.livePhase(intentA, "2026-11-22T10:15:00Z", "0"))
}

// snapshotHolds reports whether the store holds b byte for byte somewhere: a
// check from outside the store that a body was kept verbatim.
func snapshotHolds(tb testing.TB, ts *TestServer, b []byte) bool {
	tb.Helper()
	return bytes.Contains(ts.RawStore(tb), b)
}

func TestUpgradeRefusals(t *testing.T) {
	f := newOpFixture(t)
	bob := newOpAccount(t, f.ts, "bob@example.org")
	mustCBOR := func(v any) []byte {
		b, err := cbor.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	const unknown = "0f0e0d0c-0b0a-4908-8706-0504030201ff"
	base := "/v1/albums/" + f.album + "/upgrade"
	// live starts ceremony intentA before the row (only its owner's
	// tombstone is read) and aborts it after; every row then finds the
	// album in the phase it was in before the request.
	live := func(sc servertest.Scenario) servertest.Scenario {
		sc.Setup = func(tb testing.TB, _ *servertest.Scenario) {
			f.upgrade(tb, "POST", "", intent(tb, intentA, target)).WantStatus(tb, http.StatusOK)
			tb.Cleanup(func() { f.upgrade(tb, "DELETE", "?intent_id="+intentA, nil).WantStatus(tb, http.StatusOK) })
		}
		sc.Teardown = func(tb testing.TB, _ servertest.Scenario, _ *Response) {
			f.wantPhase(tb, f.upgrade(tb, "GET", "", nil), f.livePhase(intentA, "2026-11-22T10:15:00Z", "0"))
		}
		return sc
	}
	cases := []servertest.Scenario{
		{Name: "start not CBOR", Method: "POST", Path: base, Body: []byte("{\"intent_id\":1}"), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "start empty", Method: "POST", Path: base, Body: []byte{}, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "start trailing data", Method: "POST", Path: base, Body: append(intent(t, intentA, target), 0x00), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "start not a map", Method: "POST", Path: base, Body: mustCBOR([]string{intentA, target}), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "start no intent_id", Method: "POST", Path: base, Body: mustCBOR(map[string]any{"to_protocol_version": target}), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "start no target", Method: "POST", Path: base, Body: mustCBOR(map[string]any{"intent_id": intentA}), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "start intent_id not text", Method: "POST", Path: base, Body: mustCBOR(map[string]any{"intent_id": 7, "to_protocol_version": target}), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "start intent_id not a UUID", Method: "POST", Path: base, Body: intent(t, "intent-a", target), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "start target not a date", Method: "POST", Path: base, Body: intent(t, intentA, "2026-9-1"), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "start duplicate key", Method: "POST", Path: base, Body: []byte("\xa3\x69intent_id\x78\x24" + intentA + "\x73to_protocol_version\x6a" + target + "\x69intent_id\x78\x24" + intentB), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "start intent_id key in another case", Method: "POST", Path: base, Body: mustCBOR(map[string]any{"INTENT_ID": intentA, "to_protocol_version": target}), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "start target key in another case", Method: "POST", Path: base, Body: mustCBOR(map[string]any{"intent_id": intentA, "To_Protocol_Version": target}), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "start duplicate key, one in chunks", Method: "POST", Path: base, Body: []byte("\xa3\x69intent_id\x78\x24" + intentA + "\x73to_protocol_version\x6a" + target + "\x7f\x66intent\x63_id\xff\x78\x24" + intentA), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "start duplicate other key", Method: "POST", Path: base, Body: []byte("\xa4\x69intent_id\x78\x24" + intentA + "\x73to_protocol_version\x6a" + target + "\x41k\x01\x41k\x01"), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "start intent_id tagged", Method: "POST", Path: base, Body: []byte("\xa2\x69intent_id\xd9\xd9\xf7\x78\x24" + intentA + "\x73to_protocol_version\x6a" + target), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "start intent_id bytes", Method: "POST", Path: base, Body: mustCBOR(map[string]any{"intent_id": []byte(intentA), "to_protocol_version": target}), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "start map inside a tag", Method: "POST", Path: base, Body: append([]byte{0xd9, 0xd9, 0xf7}, intent(t, intentA, target)...), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "start wrong media type", Method: "POST", Path: base, Body: intent(t, intentA, target), ContentType: "application/json", WantStatus: 415, WantCode: "error.request.unsupported_media_type"},
		{Name: "start target the pin", Method: "POST", Path: base, Body: intent(t, intentA, opPin), WantStatus: 400, WantCode: "error.upgrade.bad_target"},
		{Name: "start target older than the pin", Method: "POST", Path: base, Body: intent(t, intentA, "2025-06-01"), WantStatus: 400, WantCode: "error.upgrade.bad_target"},
		{Name: "start target after the range", Method: "POST", Path: base, Body: intent(t, intentA, "2026-09-02"), WantStatus: 400, WantCode: "error.upgrade.bad_target"},
		{Name: "abort without intent_id", Method: "DELETE", Path: base, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "abort intent_id not a UUID", Method: "DELETE", Path: base + "?intent_id=x", WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "commit without intent_id", Method: "POST", Path: base + "/commit", Body: []byte{0xf6}, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "commit no ceremony, tombstone not CBOR", Method: "POST", Path: base + "/commit?intent_id=" + intentA, Body: []byte{0xff}, WantStatus: 409, WantCode: "error.album.upgrade_in_flight"},
		live(servertest.Scenario{Name: "commit tombstone not CBOR", Method: "POST", Path: base + "/commit?intent_id=" + intentA, Body: []byte{0xff}, WantStatus: 400, WantCode: "error.request.malformed"}),
		live(servertest.Scenario{Name: "commit tombstone truncated", Method: "POST", Path: base + "/commit?intent_id=" + intentA, Body: []byte{0xa1, 0x61}, WantStatus: 400, WantCode: "error.request.malformed"}),
		live(servertest.Scenario{Name: "commit tombstone empty", Method: "POST", Path: base + "/commit?intent_id=" + intentA, Body: []byte{}, WantStatus: 400, WantCode: "error.request.malformed"}),
		live(servertest.Scenario{Name: "commit tombstone two items", Method: "POST", Path: base + "/commit?intent_id=" + intentA, Body: []byte{0xf6, 0xf6}, WantStatus: 400, WantCode: "error.request.malformed"}),
		live(servertest.Scenario{Name: "commit wrong media type", Method: "POST", Path: base + "/commit?intent_id=" + intentA, Body: []byte{0xf6}, ContentType: "application/octet-stream", WantStatus: 415, WantCode: "error.request.unsupported_media_type"}),
	}
	for _, sc := range cases {
		sc.Token = f.tok.Access
		if sc.ContentType == "" {
			sc.ContentType = "application/cbor"
		}
		if sc.Teardown == nil {
			sc.Teardown = func(tb testing.TB, _ servertest.Scenario, _ *Response) {
				f.wantPhase(tb, f.upgrade(tb, "GET", "", nil), f.normalPhase("0"))
			}
		}
		t.Run(sc.Name, func(t *testing.T) { sc.Test(t, f.ts.Client) })
	}
	// Unknown and another account's albums answer 404 on every ceremony
	// endpoint, even for a well-formed request; a body they send is never
	// parsed, so a malformed or deep one is answered the same.
	for _, album := range []string{unknown, bob.album} {
		for _, r := range []Req{
			{Method: "GET", Path: "/v1/albums/" + album + "/upgrade"},
			{Method: "POST", Path: "/v1/albums/" + album + "/upgrade", Body: intent(t, intentA, target), ContentType: "application/cbor"},
			{Method: "POST", Path: "/v1/albums/" + album + "/upgrade", Body: []byte{0xff}, ContentType: "application/cbor"},
			{Method: "POST", Path: "/v1/albums/" + album + "/upgrade", Body: []byte(deepCBOR(65534)), ContentType: "application/cbor"},
			{Method: "POST", Path: "/v1/albums/" + album + "/upgrade/commit?intent_id=" + intentA, Body: []byte{0xff}, ContentType: "application/cbor"},
			{Method: "DELETE", Path: "/v1/albums/" + album + "/upgrade?intent_id=" + intentA},
			{Method: "POST", Path: "/v1/albums/" + album + "/upgrade/commit?intent_id=" + intentA, Body: []byte{0xf6}, ContentType: "application/cbor"},
		} {
			r.Token = f.tok.Access
			f.ts.Do(t, r).WantProblem(t, http.StatusNotFound, "error.album.not_found")
		}
	}
	bob.wantPhase(t, bob.upgrade(t, "GET", "", nil), bob.normalPhase("0"))
	f.ts.Do(t, Req{Method: "GET", Path: "/v1/albums/nope/upgrade", Token: f.tok.Access}).WantProblem(t, http.StatusBadRequest, "error.request.malformed")
	f.ts.Do(t, Req{Method: "GET", Path: "/v1/albums/" + f.album + "/upgrade"}).WantProblem(t, http.StatusUnauthorized, "error.auth.unauthenticated")
}
