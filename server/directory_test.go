package server_test

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"

	"sealbox/kv/fault"
	"sealbox/server"
	"sealbox/server/hybridsig"
	"sealbox/server/servertest"
)

// Test identity keys. Deriving one costs an ML-DSA key generation, so they
// are made once.
var (
	aliceKey = hybridsig.NewDevKey([32]byte{'a'})
	bobKey   = hybridsig.NewDevKey([32]byte{'b'})
)

// detCBOR encodes deterministically, so equal inputs give equal bytes (Go
// map order would otherwise vary).
var detCBOR, _ = cbor.CoreDetEncOptions().EncMode()

// directoryBody is a signed-directory stand-in: a CBOR map with the version
// and opaque binary the server must keep verbatim.
func directoryBody(tb testing.TB, version uint64, seed uint64) []byte {
	tb.Helper()
	b, err := detCBOR.Marshal(map[string]any{"directory_version": version, "devices": randomBinary(1000, seed), "signature": []byte{0, 1, 0}})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// publish POSTs a directory under the identity key keyB64.
func (ts *TestServer) publish(tb testing.TB, access, keyB64 string, body []byte) *Response {
	tb.Helper()
	return ts.Do(tb, Req{Method: "POST", Path: "/v1/auth/devices/directory", Token: access, Body: body, ContentType: "application/cbor",
		Header: map[string]string{"X-Service-Identity-Key": keyB64}})
}

func TestDirectoryRoundTrip(t *testing.T) {
	ts := MustOpenServer(t)
	alice := ts.Register(t, "alice@example.org")
	bob := ts.Register(t, "bob@example.org")
	aliceID := ts.UserID(t, alice.Access)
	body := directoryBody(t, 1, 7)

	r := ts.publish(t, alice.Access, aliceKey.PublicKeyBase64(), body).WantStatus(t, 200)
	if got := r.JSON(t)["directory_version"]; got != float64(1) {
		t.Fatalf("directory_version: got %v", got)
	}
	// Any signed-in account reads it, byte for byte, with the pinned key.
	for _, tok := range []string{alice.Access, bob.Access} {
		got := ts.Do(t, Req{Method: "GET", Path: "/v1/auth/devices/directory/" + aliceID, Token: tok}).WantStatus(t, 200)
		if !bytes.Equal(got.Body, body) {
			t.Fatalf("GET: the bytes differ from the published ones")
		}
		if ct := got.Header.Get("Content-Type"); ct != "application/cbor" {
			t.Fatalf("Content-Type: got %q", ct)
		}
		if k := got.Header.Get("X-Service-Identity-Key"); k != aliceKey.PublicKeyBase64() {
			t.Fatalf("X-Service-Identity-Key: not the pinned key")
		}
	}
	// An upper-case spelling of the id names the same account.
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/devices/directory/" + strings.ToUpper(aliceID), Token: bob.Access}).WantStatus(t, 200)

	next := directoryBody(t, 5, 8)
	ts.publish(t, alice.Access, aliceKey.PublicKeyBase64(), next).WantStatus(t, 200)
	if got := ts.Do(t, Req{Method: "GET", Path: "/v1/auth/devices/directory/" + aliceID, Token: bob.Access}); !bytes.Equal(got.Body, next) {
		t.Fatal("GET after a newer publish does not answer it")
	}
}

func TestDirectoryVersionConflict(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	key := aliceKey.PublicKeyBase64()
	ts.publish(t, tok.Access, key, directoryBody(t, 3, 1)).WantStatus(t, 200)
	for _, v := range []uint64{3, 2, 1} {
		p := ts.publish(t, tok.Access, key, directoryBody(t, v, 2)).WantProblem(t, 409, "error.directory.version_conflict")
		if p["submitted"] != float64(v) || p["stored"] != float64(3) {
			t.Fatalf("version %d: submitted/stored: %v/%v", v, p["submitted"], p["stored"])
		}
	}
	ts.publish(t, tok.Access, key, directoryBody(t, 4, 3)).WantStatus(t, 200)
}

// Two publishes of one version race: the store's compare-and-set lets
// exactly one through. (The publish limit, not under test, lets 11 through
// at once.)
func TestDirectoryConcurrentPublishCAS(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.DirectoryBurst = 20 })
	tok := ts.Register(t, "a@example.org")
	key := aliceKey.PublicKeyBase64()
	ts.publish(t, tok.Access, key, directoryBody(t, 1, 1)).WantStatus(t, 200)
	for round := uint64(2); round < 12; round++ {
		var wg sync.WaitGroup
		results := make([]*Response, 2)
		start := make(chan struct{})
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i] = ts.publish(t, tok.Access, key, directoryBody(t, round, uint64(i)))
			}()
		}
		close(start)
		wg.Wait()
		ok, conflict := 0, 0
		for _, r := range results {
			switch r.Status {
			case 200:
				ok++
			case 409:
				p := r.WantProblem(t, 409, "error.directory.version_conflict")
				if p["submitted"] != float64(round) || p["stored"] != float64(round) {
					t.Fatalf("conflict members: %s", r.Body)
				}
				conflict++
			}
		}
		if ok != 1 || conflict != 1 {
			t.Fatalf("round %d: %d succeeded and %d conflicted, want 1 and 1", round, ok, conflict)
		}
	}
}

func TestDirectoryKeyPinning(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	id := ts.UserID(t, tok.Access)
	ts.publish(t, tok.Access, aliceKey.PublicKeyBase64(), directoryBody(t, 1, 1)).WantStatus(t, 200)
	// Another key is refused even with a higher version, and nothing changes.
	ts.publish(t, tok.Access, bobKey.PublicKeyBase64(), directoryBody(t, 2, 2)).WantProblem(t, 403, "error.directory.identity_key_mismatch")
	got := ts.Do(t, Req{Method: "GET", Path: "/v1/auth/devices/directory/" + id, Token: tok.Access}).WantStatus(t, 200)
	if got.Header.Get("X-Service-Identity-Key") != aliceKey.PublicKeyBase64() || !bytes.Equal(got.Body, directoryBody(t, 1, 1)) {
		t.Fatal("a refused publish changed the directory or the key")
	}
	ts.publish(t, tok.Access, aliceKey.PublicKeyBase64(), directoryBody(t, 2, 2)).WantStatus(t, 200)
}

// cborHead concatenates raw CBOR pieces.
func cborHead(parts ...string) []byte { return []byte(strings.Join(parts, "")) }

const dvKey = "\x71directory_version" // text(17) "directory_version"

func TestDirectoryPublishRefusals(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	key := aliceKey.PublicKeyBase64()
	mustCBOR := func(v any) []byte {
		b, err := cbor.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	deep := append(cborHead("\xa2", dvKey, "\x01", "\x61x"), bytes.Repeat([]byte{0x81}, 100)...)
	deep = append(deep, 0x00)
	cases := []servertest.Scenario{
		{Name: "no token", Header: map[string]string{"X-Service-Identity-Key": key}, Body: directoryBody(t, 1, 1), WantStatus: 401, WantCode: "error.auth.unauthenticated"},
		{Name: "no identity key", Token: tok.Access, Body: directoryBody(t, 1, 1), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "identity key too short", Token: tok.Access, Header: map[string]string{"X-Service-Identity-Key": key[:len(key)-4]}, Body: directoryBody(t, 1, 1), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "identity key URL alphabet", Token: tok.Access, Header: map[string]string{"X-Service-Identity-Key": strings.NewReplacer("+", "-", "/", "_").Replace(key)}, Body: directoryBody(t, 1, 1), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "identity key unpadded", Token: tok.Access, Header: map[string]string{"X-Service-Identity-Key": strings.TrimRight(key, "=")}, Body: directoryBody(t, 1, 1), WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "wrong content type", Token: tok.Access, Header: map[string]string{"X-Service-Identity-Key": key}, Body: directoryBody(t, 1, 1), ContentType: "application/octet-stream", WantStatus: 415, WantCode: "error.request.unsupported_media_type"},
		{Name: "empty body", Token: tok.Access, Header: map[string]string{"X-Service-Identity-Key": key}, Body: []byte{}, WantStatus: 400, WantCode: "error.directory.malformed"},
		{Name: "not CBOR", Token: tok.Access, Header: map[string]string{"X-Service-Identity-Key": key}, Body: []byte("\xff\xff"), WantStatus: 400, WantCode: "error.directory.malformed"},
		{Name: "truncated", Token: tok.Access, Header: map[string]string{"X-Service-Identity-Key": key}, Body: directoryBody(t, 1, 1)[:20], WantStatus: 400, WantCode: "error.directory.malformed"},
		{Name: "trailing data", Token: tok.Access, Header: map[string]string{"X-Service-Identity-Key": key}, Body: append(directoryBody(t, 1, 1), 0x00), WantStatus: 400, WantCode: "error.directory.malformed"},
		{Name: "array", Token: tok.Access, Header: map[string]string{"X-Service-Identity-Key": key}, Body: mustCBOR([]any{1, 2}), WantStatus: 400, WantCode: "error.directory.malformed"},
		{Name: "unsigned integer", Token: tok.Access, Header: map[string]string{"X-Service-Identity-Key": key}, Body: mustCBOR(7), WantStatus: 400, WantCode: "error.directory.malformed"},
		{Name: "null", Token: tok.Access, Header: map[string]string{"X-Service-Identity-Key": key}, Body: []byte{0xf6}, WantStatus: 400, WantCode: "error.directory.malformed"},
		{Name: "no version", Token: tok.Access, Header: map[string]string{"X-Service-Identity-Key": key}, Body: mustCBOR(map[string]any{"devices": []byte{1}}), WantStatus: 400, WantCode: "error.directory.malformed"},
		{Name: "version zero", Token: tok.Access, Header: map[string]string{"X-Service-Identity-Key": key}, Body: mustCBOR(map[string]any{"directory_version": 0}), WantStatus: 400, WantCode: "error.directory.malformed"},
		{Name: "version negative", Token: tok.Access, Header: map[string]string{"X-Service-Identity-Key": key}, Body: mustCBOR(map[string]any{"directory_version": -1}), WantStatus: 400, WantCode: "error.directory.malformed"},
		{Name: "version text", Token: tok.Access, Header: map[string]string{"X-Service-Identity-Key": key}, Body: mustCBOR(map[string]any{"directory_version": "1"}), WantStatus: 400, WantCode: "error.directory.malformed"},
		{Name: "version float", Token: tok.Access, Header: map[string]string{"X-Service-Identity-Key": key}, Body: mustCBOR(map[string]any{"directory_version": 1.0}), WantStatus: 400, WantCode: "error.directory.malformed"},
		{Name: "version tagged", Token: tok.Access, Header: map[string]string{"X-Service-Identity-Key": key}, Body: cborHead("\xa1", dvKey, "\xc2\x41\x01"), WantStatus: 400, WantCode: "error.directory.malformed"},
		{Name: "version in a self-describe tag", Token: tok.Access, Header: map[string]string{"X-Service-Identity-Key": key}, Body: cborHead("\xa1", dvKey, "\xd9\xd9\xf7\x01"), WantStatus: 400, WantCode: "error.directory.malformed"},
		{Name: "version key in a self-describe tag", Token: tok.Access, Header: map[string]string{"X-Service-Identity-Key": key}, Body: cborHead("\xa1\xd9\xd9\xf7", dvKey, "\x01"), WantStatus: 400, WantCode: "error.directory.malformed"},
		{Name: "version in a nested map only", Token: tok.Access, Header: map[string]string{"X-Service-Identity-Key": key}, Body: mustCBOR(map[string]any{"inner": map[string]any{"directory_version": 1}}), WantStatus: 400, WantCode: "error.directory.malformed"},
		{Name: "version key in another case", Token: tok.Access, Header: map[string]string{"X-Service-Identity-Key": key}, Body: mustCBOR(map[string]any{"Directory_Version": 1}), WantStatus: 400, WantCode: "error.directory.malformed"},
		{Name: "version key as bytes", Token: tok.Access, Header: map[string]string{"X-Service-Identity-Key": key}, Body: cborHead("\xa1\x51directory_version\x01"), WantStatus: 400, WantCode: "error.directory.malformed"},
		{Name: "duplicate version key", Token: tok.Access, Header: map[string]string{"X-Service-Identity-Key": key}, Body: cborHead("\xa2", dvKey, "\x01", dvKey, "\x02"), WantStatus: 400, WantCode: "error.directory.malformed"},
		{Name: "duplicate other key", Token: tok.Access, Header: map[string]string{"X-Service-Identity-Key": key}, Body: cborHead("\xa3", dvKey, "\x01", "\x01\x01", "\x01\x02"), WantStatus: 400, WantCode: "error.directory.malformed"},
		{Name: "duplicate version key, one in chunks", Token: tok.Access, Header: map[string]string{"X-Service-Identity-Key": key}, Body: cborHead("\xa2", dvKey, "\x01", "\x7f\x69directory\x68_version\xff", "\x02"), WantStatus: 400, WantCode: "error.directory.malformed"},
		{Name: "duplicate byte-string key", Token: tok.Access, Header: map[string]string{"X-Service-Identity-Key": key}, Body: cborHead("\xa3", dvKey, "\x01", "\x41k\x01", "\x41k\x02"), WantStatus: 400, WantCode: "error.directory.malformed"},
		{Name: "map inside a self-describe tag", Token: tok.Access, Header: map[string]string{"X-Service-Identity-Key": key}, Body: cborHead("\xd9\xd9\xf7\xa1", dvKey, "\x01"), WantStatus: 400, WantCode: "error.directory.malformed"},
		{Name: "map inside another tag", Token: tok.Access, Header: map[string]string{"X-Service-Identity-Key": key}, Body: cborHead("\xd8\x20\xa1", dvKey, "\x01"), WantStatus: 400, WantCode: "error.directory.malformed"},
		{Name: "nesting too deep", Token: tok.Access, Header: map[string]string{"X-Service-Identity-Key": key}, Body: deep, WantStatus: 400, WantCode: "error.directory.malformed"},
	}
	for _, sc := range cases {
		sc.Method, sc.Path = "POST", "/v1/auth/devices/directory"
		if sc.ContentType == "" {
			sc.ContentType = "application/cbor"
		}
		t.Run(sc.Name, func(t *testing.T) { sc.Test(t, ts.Client) })
	}
	// Over 256 KiB: 413 with no body.
	big := mustCBOR(map[string]any{"directory_version": 1, "pad": make([]byte, 256<<10)})
	if r := ts.publish(t, tok.Access, key, big); r.Status != 413 || len(r.Body) != 0 {
		t.Fatalf("over the limit: got %d with %d body bytes", r.Status, len(r.Body))
	}
	// Accepted: integer keys and an indefinite-length map beside the version.
	ts.publish(t, tok.Access, key, cborHead("\xbf", "\x01\x02", dvKey, "\x1b\x00\x00\x00\x01\x00\x00\x00\x00", "\xff")).WantStatus(t, 200)
	// Nothing refused above pinned another key.
	ts.publish(t, tok.Access, bobKey.PublicKeyBase64(), directoryBody(t, 1<<33, 1)).WantProblem(t, 403, "error.directory.identity_key_mismatch")
}

// TestDirectoryVersionBound: a version above 2^53-1 is 422
// error.request.invalid naming directory_version and stores nothing, so a
// stolen token cannot publish 2^64-1 and leave the owner no version above
// it; 2^53-1 itself is accepted.
func TestDirectoryVersionBound(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	key := aliceKey.PublicKeyBase64()
	publish := func(name string, version uint64) servertest.Scenario {
		return servertest.Scenario{Name: name, Method: "POST", Path: "/v1/auth/devices/directory", Token: tok.Access,
			Body: directoryBody(t, version, 1), ContentType: "application/cbor", Header: map[string]string{"X-Service-Identity-Key": key},
			WantStatus: 422, WantCode: fault.ECodeInvalid, WantField: "directory_version"}
	}
	accepted := publish("2^53-1", 1<<53-1)
	accepted.WantStatus, accepted.WantCode, accepted.WantField = 200, "", ""
	for _, sc := range []servertest.Scenario{publish("2^64-1", 1<<64-1), publish("2^63", 1<<63), publish("2^53", 1<<53), accepted} {
		t.Run(sc.Name, func(t *testing.T) {
			sc.Test(t, ts.Client)
			if sc.WantCode == "" {
				return
			}
			ts.Do(t, Req{Method: "GET", Path: "/v1/auth/devices/directory/" + ts.UserID(t, tok.Access), Token: tok.Access}).
				WantProblem(t, 404, fault.ECodeDirectoryNotFound)
		})
	}
}

// TestDirectoryOtherKeyTypes: beside directory_version, a top-level key of
// any CBOR type is skipped and the directory kept byte for byte (server/PROTOCOL.md §5:
// only a missing or bad version is malformed). The publish limit, not under
// test, lets them all through at once.
func TestDirectoryOtherKeyTypes(t *testing.T) {
	ts := MustOpenServer(t, func(c *server.Config) { c.DirectoryBurst = 50 })
	tok := ts.Register(t, "a@example.org")
	id := ts.UserID(t, tok.Access)
	key := aliceKey.PublicKeyBase64()
	for i, tc := range []struct {
		name  string
		other string // one or more encoded key/value pairs
		pairs byte   // how many
	}{
		{"byte string", "\x46device\x01", 1},
		{"byte string spelling the version key", "\x51directory_version\x00", 1},
		{"byte string and text with the same bytes", "\x41k\x01\x61k\x02", 2},
		{"unsigned integer", "\x07\x01", 1},
		{"unsigned integer beyond int64", "\x1b\xff\xff\xff\xff\xff\xff\xff\xff\x01", 1},
		{"negative integer", "\x20\x01", 1},
		{"negative integer beyond int64", "\x3b\xff\xff\xff\xff\xff\xff\xff\xff\x01", 1},
		{"bignum", "\xc2\x49\x01\x00\x00\x00\x00\x00\x00\x00\x00\x01", 1},
		{"booleans", "\xf4\x01\xf5\x02", 2},
		{"float", "\xfb\x3f\xf8\x00\x00\x00\x00\x00\x00\x01", 1},
		{"positive and negative zero", "\xf9\x00\x00\x01\xf9\x80\x00\x02", 2},
		{"null and undefined", "\xf6\x01\xf7\x02", 2},
		{"simple value", "\xf8\x20\x01", 1},
		{"tagged text", "\xd8\x20\x63x:y\x01", 1},
		{"tag whose content does not suit it", "\xc1\x80\x01", 1},
		{"text in another case", "\x71Directory_Version\x00", 1},
		{"text that is not UTF-8", "\x62\xff\xfe\x01", 1},
		{"array", "\x82\x01\x02\x01", 1},
		{"map", "\xa1\x01\x02\x01", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			version := byte(i + 1)
			body := cborHead(string([]byte{0xa1 + tc.pairs}), dvKey, string([]byte{version}), tc.other)
			r := ts.publish(t, tok.Access, key, body).WantStatus(t, 200)
			if got := r.JSON(t)["directory_version"]; got != float64(version) {
				t.Fatalf("directory_version: got %v, want %d", got, version)
			}
			got := ts.Do(t, Req{Method: "GET", Path: "/v1/auth/devices/directory/" + id, Token: tok.Access}).WantStatus(t, 200)
			if !bytes.Equal(got.Body, body) {
				t.Fatalf("GET: got %x, want the published %x", got.Body, body)
			}
		})
	}
}

func TestDirectoryGetRefusals(t *testing.T) {
	ts := MustOpenServer(t)
	tok := ts.Register(t, "a@example.org")
	noDir := ts.Register(t, "b@example.org")
	cases := []servertest.Scenario{
		{Name: "no token", Path: "/v1/auth/devices/directory/6f1c2b9e-3d4a-4e5f-8a7b-1c2d3e4f5a6b", WantStatus: 401, WantCode: "error.auth.unauthenticated"},
		{Name: "not a UUID", Path: "/v1/auth/devices/directory/alice", Token: tok.Access, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "UUID without hyphens", Path: "/v1/auth/devices/directory/6f1c2b9e3d4a4e5f8a7b1c2d3e4f5a6b", Token: tok.Access, WantStatus: 400, WantCode: "error.request.malformed"},
		{Name: "unknown account", Path: "/v1/auth/devices/directory/6f1c2b9e-3d4a-4e5f-8a7b-1c2d3e4f5a6b", Token: tok.Access, WantStatus: 404, WantCode: "error.directory.not_found"},
		{Name: "account without a directory", Path: "/v1/auth/devices/directory/" + ts.UserID(t, noDir.Access), Token: tok.Access, WantStatus: 404, WantCode: "error.directory.not_found"},
	}
	for _, sc := range cases {
		sc.Method = "GET"
		t.Run(sc.Name, func(t *testing.T) { sc.Test(t, ts.Client) })
	}
}

// TestDirectoryPublishLimit: an account may publish its directory 10 times
// at once, then once a minute (60 an hour), counted in the store so the
// limit holds across nodes; beyond, 429 error.limit.directory_publishes
// with Retry-After, counted under the flag's name, and nothing is appended
// to the log. Refused publishes (409) spend nothing, and other accounts are
// not affected.
func TestDirectoryPublishLimit(t *testing.T) {
	ts := MustOpenServer(t)
	other := ts.SecondNode(t)
	alice := ts.Register(t, "alice@example.org")
	bob := ts.Register(t, "bob@example.org")
	key := aliceKey.PublicKeyBase64()
	version := uint64(0)
	publish := func(node *TestServer) *Response {
		version++
		return node.publish(t, alice.Access, key, directoryBody(t, version, version))
	}
	for i := range 10 {
		publish([]*TestServer{ts, other}[i%2]).WantStatus(t, 200)
		ts.publish(t, alice.Access, key, directoryBody(t, 1, 1)).WantProblem(t, 409, fault.ECodeDirectoryVersionConflict)
	}
	log := logClient{t, ts}
	before, _ := log.checkpoint()
	for _, node := range []*TestServer{ts, other} {
		r := publish(node)
		r.WantProblem(t, 429, fault.ECodeLimitDirectoryPublishes)
		if got := r.Header.Get("Retry-After"); got != "60" {
			t.Fatalf("Retry-After %q, want 60", got)
		}
	}
	if after, _ := log.checkpoint(); after != before {
		t.Fatalf("refused publishes grew the log from %d to %d records", before.N, after.N)
	}
	ts.WantMetric(t, `sealbox_limit_refusals_total{limit="directory-publishes"} 1`)
	ts.publish(t, bob.Access, bobKey.PublicKeyBase64(), directoryBody(t, 1, 1)).WantStatus(t, 200)

	ts.Clock.Advance(time.Minute)
	publish(other).WantStatus(t, 200)
	publish(ts).WantProblem(t, 429, fault.ECodeLimitDirectoryPublishes)
	// An hour idle earns the whole burst back.
	ts.Clock.Advance(time.Hour)
	alice = ts.Login(t, "alice@example.org")
	for range 10 {
		publish(ts).WantStatus(t, 200)
	}
	publish(ts).WantProblem(t, 429, fault.ECodeLimitDirectoryPublishes)
}
