package server_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"sealbox/kv/fault"
	"sealbox/server"
	"sealbox/server/hybridsig"
	"sealbox/server/translog"
)

// countingSigner counts the checkpoints signed.
type countingSigner struct {
	note.Signer
	signed *atomic.Int64
}

func (c countingSigner) Sign(msg []byte) ([]byte, error) {
	c.signed.Add(1)
	return c.Signer.Sign(msg)
}

// newLogKey makes a log key named origin whose signatures are counted.
func newLogKey(tb testing.TB, origin string) (translog.Key, *atomic.Int64) {
	tb.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		tb.Fatal(err)
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		tb.Fatal(err)
	}
	n := new(atomic.Int64)
	return translog.Key{Signer: countingSigner{signer, n}, VerifierKey: vkey}, n
}

// logClient reads the log over HTTP, as an auditor does: it is a
// tlog.TileReader, so x/mod's tlog builds and checks proofs from it.
type logClient struct {
	tb testing.TB
	ts *TestServer
}

func (c logClient) Height() int { return 8 }

func (c logClient) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		r := c.ts.Do(c.tb, Req{Method: "GET", Path: "/v1/transparency/tile/" + c2spPath(t)})
		if r.Status != 200 {
			return nil, fmt.Errorf("tile %s: %d %s", c2spPath(t), r.Status, r.Body)
		}
		out[i] = r.Body
	}
	return out, nil
}

func (c logClient) SaveTiles([]tlog.Tile, [][]byte) {}

// c2spPath spells an x/mod tile the tlog-tiles way: no height, "entries"
// for "data".
func c2spPath(t tlog.Tile) string {
	p := strings.TrimPrefix(t.Path(), "tile/8/")
	if rest, ok := strings.CutPrefix(p, "data/"); ok {
		return "entries/" + rest
	}
	return p
}

// checkpoint has the log signed as the background worker would, fetches
// the signed checkpoint, verifies its signature with the
// key the server publishes, and returns the tree it names.
func (c logClient) checkpoint() (tlog.Tree, []byte) {
	c.tb.Helper()
	c.ts.SignCheckpoint(c.tb)
	vkey := strings.TrimSpace(string(c.ts.Do(c.tb, Req{Method: "GET", Path: "/v1/transparency/key"}).WantStatus(c.tb, 200).Body))
	verifier, err := note.NewVerifier(vkey)
	if err != nil {
		c.tb.Fatalf("the served key %q: %v", vkey, err)
	}
	r := c.ts.Do(c.tb, Req{Method: "GET", Path: "/v1/transparency/checkpoint"}).WantStatus(c.tb, 200)
	if ct := r.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
		c.tb.Fatalf("checkpoint Content-Type %q", ct)
	}
	n, err := note.Open(r.Body, note.VerifierList(verifier))
	if err != nil {
		c.tb.Fatalf("the checkpoint's signature: %v\n%s", err, r.Body)
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) != 4 || lines[0] != verifier.Name() || lines[3] != "" {
		c.tb.Fatalf("checkpoint text %q: want origin %s, size, root", n.Text, verifier.Name())
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		c.tb.Fatal(err)
	}
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != tlog.HashSize {
		c.tb.Fatalf("checkpoint root %q", lines[2])
	}
	return tlog.Tree{N: size, Hash: tlog.Hash(root)}, r.Body
}

// proveIncluded checks record index against tree with x/mod's tlog, from
// tiles read over HTTP, and that the entry bundle holds the record.
func (c logClient) proveIncluded(tree tlog.Tree, index int64, record []byte) {
	c.tb.Helper()
	hashes := tlog.TileHashReader(tree, c)
	proof, err := tlog.ProveRecord(tree.N, index, hashes)
	if err != nil {
		c.tb.Fatalf("prove record %d in tree %d: %v", index, tree.N, err)
	}
	if err := tlog.CheckRecord(proof, tree.N, tree.Hash, index, tlog.RecordHash(record)); err != nil {
		c.tb.Fatalf("record %d is not included: %v", index, err)
	}
	tile := tlog.TileForIndex(8, tlog.StoredHashIndex(0, index))
	tile.L = -1
	// The entry bundle of the record's tile, at the tree's width.
	tile.W = int(min(256, tree.N-tile.N*256))
	data, err := c.ReadTiles([]tlog.Tile{tile})
	if err != nil {
		c.tb.Fatal(err)
	}
	bundle, i := data[0], int64(0)
	for len(bundle) >= 2 {
		n := int(binary.BigEndian.Uint16(bundle))
		entry := bundle[2 : 2+n]
		bundle = bundle[2+n:]
		if tile.N*256+i == index && !bytes.Equal(entry, record) {
			c.tb.Fatalf("entry %d in the bundle is %q, want %q", index, entry, record)
		}
		i++
	}
	if i != int64(tile.W) || len(bundle) != 0 {
		c.tb.Fatalf("the bundle holds %d entries and %d stray bytes, want %d", i, len(bundle), tile.W)
	}
}

// proveConsistent checks that newer extends older.
func (c logClient) proveConsistent(older, newer tlog.Tree) {
	c.tb.Helper()
	proof, err := tlog.ProveTree(newer.N, older.N, tlog.TileHashReader(newer, c))
	if err != nil {
		c.tb.Fatal(err)
	}
	if err := tlog.CheckTree(proof, newer.N, newer.Hash, older.N, older.Hash); err != nil {
		c.tb.Fatalf("tree %d does not extend tree %d: %v", newer.N, older.N, err)
	}
}

// logRecord is the record a publish of body under key appends.
func logRecord(userID string, version uint64, body []byte, key *hybridsig.DevKey) []byte {
	return []byte(fmt.Sprintf("sealbox-directory/v1 %s %d %x %x\n", userID, version, sha256.Sum256(body), sha256.Sum256(key.PublicKey())))
}

// TestTransparencyLog: every publish is a record whose index the publish
// and the directory read give; each is proven included from tiles read over
// HTTP; checkpoints are signed notes, each tree extends the earlier ones, and
// a checkpoint is signed once per tree size, not per request. 260 publishes
// cross a tile boundary, so full and partial tiles are both read (the
// publish limit's burst is raised to let them through at once).
func TestTransparencyLog(t *testing.T) {
	key, signed := newLogKey(t, "sealbox/test.example")
	ts := MustOpenServer(t, func(c *server.Config) { c.LogKey = key; c.DirectoryBurst = 300 })
	alice := ts.Register(t, "alice@example.org")
	bob := ts.Register(t, "bob@example.org")
	aliceID, bobID := ts.UserID(t, alice.Access), ts.UserID(t, bob.Access)
	log := logClient{t, ts}

	empty, _ := log.checkpoint()
	if empty.N != 0 {
		t.Fatalf("a new log has size %d", empty.N)
	}
	type published struct {
		index  int64
		record []byte
	}
	var all []published
	publish := func(access, userID string, key *hybridsig.DevKey, version uint64) {
		t.Helper()
		body := directoryBody(t, version, version)
		r := ts.publish(t, access, key.PublicKeyBase64(), body).WantStatus(t, 200)
		index, err := strconv.ParseInt(r.Header.Get("X-Transparency-Index"), 10, 64)
		if err != nil || index != int64(len(all)) {
			t.Fatalf("publish %d: X-Transparency-Index %q", len(all), r.Header.Get("X-Transparency-Index"))
		}
		got := ts.Do(t, Req{Method: "GET", Path: "/v1/auth/devices/directory/" + userID, Token: access}).WantStatus(t, 200)
		if got.Header.Get("X-Transparency-Index") != strconv.FormatInt(index, 10) {
			t.Fatalf("GET directory: X-Transparency-Index %q, want %d", got.Header.Get("X-Transparency-Index"), index)
		}
		all = append(all, published{index, logRecord(userID, version, body, key)})
	}
	publish(alice.Access, aliceID, aliceKey, 1)
	publish(bob.Access, bobID, bobKey, 1)
	publish(alice.Access, aliceID, aliceKey, 2)

	small, note1 := log.checkpoint()
	if small.N != 3 {
		t.Fatalf("tree size %d after 3 publishes", small.N)
	}
	for _, p := range all {
		log.proveIncluded(small, p.index, p.record)
	}
	before := signed.Load()
	if _, again := log.checkpoint(); !bytes.Equal(again, note1) || signed.Load() != before {
		t.Fatalf("a second request at the same size signed again (%d signatures, was %d)", signed.Load(), before)
	}

	for v := uint64(2); len(all) < 260; v++ {
		publish(bob.Access, bobID, bobKey, v)
	}
	large, _ := log.checkpoint()
	if large.N != 260 {
		t.Fatalf("tree size %d after 260 publishes", large.N)
	}
	for _, p := range all {
		log.proveIncluded(large, p.index, p.record)
	}
	log.proveConsistent(small, large)

	// A full tile is immutable and says so; a tile past the tree is 404.
	r := ts.Do(t, Req{Method: "GET", Path: "/v1/transparency/tile/0/000"}).WantStatus(t, 200)
	if len(r.Body) != 256*tlog.HashSize || !strings.Contains(r.Header.Get("Cache-Control"), "immutable") {
		t.Fatalf("full tile 0/000: %d bytes, Cache-Control %q", len(r.Body), r.Header.Get("Cache-Control"))
	}
	for _, path := range []string{"0/001", "0/001.p/5", "entries/001", "1/000", "0/000.p/255x"} {
		want, code := 404, fault.ECodeNotFound
		if strings.HasSuffix(path, "x") {
			want, code = 400, fault.ECodeMalformed
		}
		ts.Do(t, Req{Method: "GET", Path: "/v1/transparency/tile/" + path}).WantProblem(t, want, code)
	}
	ts.Do(t, Req{Method: "GET", Path: "/v1/transparency/tile/0/001.p/4"}).WantStatus(t, 200)
}

// TestTransparencyRefusedPublishAppendsNothing: a publish refused for its
// version (409), its key (403) or its body (400) leaves the log as it was.
func TestTransparencyRefusedPublishAppendsNothing(t *testing.T) {
	ts := MustOpenServer(t)
	alice := ts.Register(t, "alice@example.org")
	ts.publish(t, alice.Access, aliceKey.PublicKeyBase64(), directoryBody(t, 1, 1)).WantStatus(t, 200)
	log := logClient{t, ts}
	before, _ := log.checkpoint()
	ts.publish(t, alice.Access, aliceKey.PublicKeyBase64(), directoryBody(t, 1, 2)).WantProblem(t, 409, fault.ECodeDirectoryVersionConflict)
	ts.publish(t, alice.Access, bobKey.PublicKeyBase64(), directoryBody(t, 2, 2)).WantProblem(t, 403, fault.ECodeIdentityKeyMismatch)
	ts.publish(t, alice.Access, aliceKey.PublicKeyBase64(), []byte{0xa1}).WantProblem(t, 400, fault.ECodeDirectoryMalformed)
	ts.publish(t, alice.Access, "not base64", directoryBody(t, 2, 2)).WantProblem(t, 400, fault.ECodeMalformed)
	if after, _ := log.checkpoint(); after != before {
		t.Fatalf("refused publishes changed the tree from %d to %d records", before.N, after.N)
	}
}

// TestTransparencyLogSurvivesRestart: after a restart the same checkpoint
// is served without signing again, and the tree goes on from it.
func TestTransparencyLogSurvivesRestart(t *testing.T) {
	key, signed := newLogKey(t, "sealbox/restart.example")
	ts := MustOpenServer(t, func(c *server.Config) { c.LogKey = key })
	alice := ts.Register(t, "alice@example.org")
	aliceID := ts.UserID(t, alice.Access)
	ts.publish(t, alice.Access, aliceKey.PublicKeyBase64(), directoryBody(t, 1, 1)).WantStatus(t, 200)
	ts.publish(t, alice.Access, aliceKey.PublicKeyBase64(), directoryBody(t, 2, 2)).WantStatus(t, 200)
	log := logClient{t, ts}
	first, note1 := log.checkpoint()
	count := signed.Load()

	ts.Restart(t)
	log = logClient{t, ts}
	again, note2 := log.checkpoint()
	if again != first || !bytes.Equal(note1, note2) || signed.Load() != count {
		t.Fatalf("after a restart: tree %v (was %v), signatures %d (was %d)", again, first, signed.Load(), count)
	}
	alice = ts.Login(t, "alice@example.org")
	ts.publish(t, alice.Access, aliceKey.PublicKeyBase64(), directoryBody(t, 3, 3)).WantStatus(t, 200)
	third, _ := log.checkpoint()
	if third.N != 3 {
		t.Fatalf("tree size %d after a third publish", third.N)
	}
	log.proveConsistent(first, third)
	log.proveIncluded(third, 2, logRecord(aliceID, 3, directoryBody(t, 3, 3), aliceKey))
}

// memHashes is a tlog.HashReader over hashes computed in the test.
type memHashes map[int64]tlog.Hash

func (m memHashes) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		h, ok := m[idx]
		if !ok {
			return nil, fmt.Errorf("no hash at %d", idx)
		}
		out[i] = h
	}
	return out, nil
}

// TestTransparencyTileIsTheNamedTile: every tile the server answers 200 is
// the tile its path names, computed here from the records alone; a tile the
// tree cannot hold (past its end, or so far that its first index overflows
// an int64, such as entries N=2^62, which once wrapped round to record 0) is
// 404, never 200 nor 500.
func TestTransparencyTileIsTheNamedTile(t *testing.T) {
	ts := MustOpenServer(t)
	alice := ts.Register(t, "alice@example.org")
	aliceID := ts.UserID(t, alice.Access)
	hashes := memHashes{}
	var records [][]byte
	for v := uint64(1); v <= 3; v++ {
		body := directoryBody(t, v, v)
		ts.publish(t, alice.Access, aliceKey.PublicKeyBase64(), body).WantStatus(t, 200)
		rec := logRecord(aliceID, v, body, aliceKey)
		stored, err := tlog.StoredHashes(int64(len(records)), rec, hashes)
		if err != nil {
			t.Fatal(err)
		}
		for i, h := range stored {
			hashes[tlog.StoredHashIndex(0, int64(len(records)))+int64(i)] = h
		}
		records = append(records, rec)
	}
	size := int64(len(records))
	want := func(tile tlog.Tile) ([]byte, bool) {
		if tile.L < 0 {
			if tile.N != 0 || int64(tile.W) > size {
				return nil, false
			}
			var b []byte
			for _, rec := range records[:tile.W] {
				b = binary.BigEndian.AppendUint16(b, uint16(len(rec)))
				b = append(b, rec...)
			}
			return b, true
		}
		if tile.N != 0 || tile.L >= 2 || int64(tile.W) > size>>(8*tile.L) {
			return nil, false
		}
		data, err := tlog.ReadTileData(tile, hashes)
		if err != nil {
			t.Fatal(err)
		}
		return data, true
	}
	named := []tlog.Tile{{H: 8, L: -1, N: 1 << 62, W: 1}, {H: 8, L: -1, N: 1<<55 - 1, W: 256}, {H: 8, L: 0, N: 1 << 62, W: 3}}
	rng := mrand.New(mrand.NewPCG(1, 2))
	for range 400 {
		tile := tlog.Tile{H: 8, L: rng.IntN(5) - 1, W: 1 + rng.IntN(4)}
		if tile.W == 4 {
			tile.W = 256
		}
		switch rng.IntN(3) {
		case 0:
			tile.N = rng.Int64N(3)
		case 1:
			tile.N = int64(1) << rng.IntN(63)
		default:
			tile.N = rng.Int64()
		}
		named = append(named, tile)
	}
	for _, tile := range named {
		path := c2spPath(tile)
		r := ts.Do(t, Req{Method: "GET", Path: "/v1/transparency/tile/" + path})
		body, exists := want(tile)
		if !exists {
			r.WantProblem(t, 404, fault.ECodeNotFound)
			continue
		}
		if r.Status != 200 || !bytes.Equal(r.Body, body) {
			t.Fatalf("tile %s: %d, %d bytes; want 200 with the %d bytes of the tile it names", path, r.Status, len(r.Body), len(body))
		}
	}
}

// TestTransparencyDirectoryReset: after the operator's reset of a directory
// (sealbox users reset-directory) the account's sessions are closed, its
// directory is gone, and a new key can be pinned from version 1, though a
// thief had published the largest version under another; the log proves
// the thief's record, the reset record and the new pin, in that order, and
// each checkpoint extends the one before.
func TestTransparencyDirectoryReset(t *testing.T) {
	ts := MustOpenServer(t)
	alice := ts.Register(t, "alice@example.org")
	aliceID := ts.UserID(t, alice.Access)
	log := logClient{t, ts}
	stolen := directoryBody(t, 1<<53-1, 1)
	ts.publish(t, alice.Access, bobKey.PublicKeyBase64(), stolen).WantStatus(t, 200)
	ts.publish(t, alice.Access, aliceKey.PublicKeyBase64(), directoryBody(t, 1, 2)).WantProblem(t, 403, fault.ECodeIdentityKeyMismatch)
	before, _ := log.checkpoint()

	r, err := ts.Store.ResetDirectory("alice@example.org")
	if err != nil || !r.Cleared || r.LogIndex != 1 || r.RevokedSessions != 1 || r.AccountID != aliceID {
		t.Fatalf("reset: %+v, %v", r, err)
	}
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: alice.Access}).WantProblem(t, 401, fault.ECodeUnauthenticated)
	alice = ts.Login(t, "alice@example.org")
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/devices/directory/" + aliceID, Token: alice.Access}).WantProblem(t, 404, fault.ECodeDirectoryNotFound)
	fresh := directoryBody(t, 1, 3)
	if got := ts.publish(t, alice.Access, aliceKey.PublicKeyBase64(), fresh).WantStatus(t, 200).Header.Get("X-Transparency-Index"); got != "2" {
		t.Fatalf("the new pin's index %q, want 2", got)
	}
	got := ts.Do(t, Req{Method: "GET", Path: "/v1/auth/devices/directory/" + aliceID, Token: alice.Access}).WantStatus(t, 200)
	if got.Header.Get("X-Service-Identity-Key") != aliceKey.PublicKeyBase64() || !bytes.Equal(got.Body, fresh) {
		t.Fatal("the directory after the reset is not the new one under the new key")
	}

	after, _ := log.checkpoint()
	if after.N != 3 {
		t.Fatalf("tree size %d, want 3", after.N)
	}
	log.proveConsistent(before, after)
	resetRecord := []byte(fmt.Sprintf("sealbox-directory-reset/v1 %s %d %x\n", aliceID, uint64(1<<53-1), sha256.Sum256(bobKey.PublicKey())))
	log.proveIncluded(after, 0, logRecord(aliceID, 1<<53-1, stolen, bobKey))
	log.proveIncluded(after, 1, resetRecord)
	log.proveIncluded(after, 2, logRecord(aliceID, 1, fresh, aliceKey))

	// Without a directory, only the sessions close; the log is unchanged.
	if _, err := ts.Store.ResetDirectory("alice@example.org"); err != nil {
		t.Fatal(err)
	}
	bob := ts.Register(t, "bob@example.org")
	if r, err := ts.Store.ResetDirectory("bob@example.org"); err != nil || r.Cleared || r.RevokedSessions != 1 {
		t.Fatalf("reset of an account without a directory: %+v, %v", r, err)
	}
	ts.Do(t, Req{Method: "GET", Path: "/v1/auth/profile", Token: bob.Access}).WantProblem(t, 401, fault.ECodeUnauthenticated)
	if last, _ := log.checkpoint(); last.N != 4 {
		t.Fatalf("tree size %d after a reset of alice's new directory and of bob's none, want 4", last.N)
	}
}

// TestCheckpointIsSignedInTheBackground: the server signs nothing itself:
// before the first checkpoint both checkpoint paths are 404 (the moment
// after a new store's first start), a publish changes neither until the
// next signing, and without witnesses both serve the newest signed one.
func TestCheckpointIsSignedInTheBackground(t *testing.T) {
	ts := MustOpenServer(t)
	for _, path := range []string{"/v1/transparency/checkpoint", "/v1/transparency/checkpoint/latest"} {
		ts.Do(t, Req{Method: "GET", Path: path}).WantProblem(t, 404, fault.ECodeNotFound)
	}
	ts.SignCheckpoint(t)
	before := ts.Do(t, Req{Method: "GET", Path: "/v1/transparency/checkpoint"}).WantStatus(t, 200).Body
	alice := ts.Register(t, "alice@example.org")
	ts.publish(t, alice.Access, aliceKey.PublicKeyBase64(), directoryBody(t, 1, 1)).WantStatus(t, 200)
	if got := ts.Do(t, Req{Method: "GET", Path: "/v1/transparency/checkpoint"}).WantStatus(t, 200).Body; !bytes.Equal(got, before) {
		t.Fatalf("a publish signed a checkpoint on its own:\n%s", got)
	}
	ts.SignCheckpoint(t)
	got := ts.Do(t, Req{Method: "GET", Path: "/v1/transparency/checkpoint"}).WantStatus(t, 200).Body
	latest := ts.Do(t, Req{Method: "GET", Path: "/v1/transparency/checkpoint/latest"}).WantStatus(t, 200).Body
	if !bytes.Contains(got, []byte("\n1\n")) || !bytes.Equal(got, latest) {
		t.Fatalf("after signing: checkpoint\n%s\nlatest\n%s", got, latest)
	}
}
