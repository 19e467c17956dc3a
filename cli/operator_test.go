package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"sealbox/blobs"
	"sealbox/blobs/s3"
	"sealbox/blobs/s3test"
	"sealbox/cli/admin"
	"sealbox/kv"
	"sealbox/kv/bolt"
	"sealbox/kv/pgtest"
	"sealbox/server"
)

// engineLocation is a location on the networked engines the test run has: a
// store in PostgreSQL (SEALBOX_TEST_PG) and/or blobs in a bucket
// (SEALBOX_TEST_S3), and a data directory of its own. A run with neither
// skips the test.
func engineLocation(t *testing.T) Location {
	t.Helper()
	if !pgtest.Enabled() && !s3test.Enabled() {
		t.Skip("neither SEALBOX_TEST_PG nor SEALBOX_TEST_S3 is set")
	}
	loc := Location{Data: filepath.Join(t.TempDir(), "data")}
	if pgtest.Enabled() {
		loc.Store = pgtest.URL(t)
	}
	if s3test.Enabled() {
		loc.Blobs = s3test.URL(t)
	}
	return loc
}

// serveFails runs serve on loc and returns its error, failing the test if
// it starts.
func serveFails(t *testing.T, loc Location) error {
	t.Helper()
	s := &Serve{Location: loc, Listen: "127.0.0.1:0", Config: server.DefaultConfig()}
	s.Config.Log = s.Config.Log.Output(io.Discard)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.Ready = func(string) {
		t.Errorf("serve started on %+v", loc)
		cancel()
	}
	return s.Run(ctx)
}

// inlineLink is a link serving small blobs, which the store keeps inline.
const inlineLink = "00000000000000000000000000000003"

// shareSmallBlobs uploads smallBlob 0..n-1 and registers link serving them.
func shareSmallBlobs(t *testing.T, api apiClient, token, upload, link string, n int) {
	t.Helper()
	var hashes []string
	for i := range n {
		if status := api.put(token, upload, smallBlob(i)); status != 201 {
			t.Fatalf("put small %d: %d", i, status)
		}
		hashes = append(hashes, hashHex(smallBlob(i)))
	}
	if status, m := api.json("POST", "/v1/shares", token, map[string]any{"opaque_id": link, "metadata_hash": hashes[0], "serves": hashes}); status != 201 {
		t.Fatalf("share of the small blobs: %d %v", status, m)
	}
}

// wantSmallBlobsShared reads smallBlob 0..n-1 through link on the server at
// base and fails unless each is byte-identical.
func wantSmallBlobsShared(t *testing.T, base, link string, n int) {
	t.Helper()
	for i := range n {
		resp, err := http.Get(base + "/s/" + link + "/blob/" + hashHex(smallBlob(i)))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(got) != string(smallBlob(i)) {
			t.Fatalf("small blob %d: %d, %d bytes", i, resp.StatusCode, len(got))
		}
	}
}

// TestRestoreIntoEngines: a one-box instance's backup is restored into
// empty engines (PostgreSQL and/or a bucket, the keys into --data); an
// interrupted restore is refused by serve and finished by running it again;
// the result passes check --deep and serves every blob and the account;
// engines that hold anything else, and a data directory with other keys,
// are refused.
func TestRestoreIntoEngines(t *testing.T) {
	target := engineLocation(t)
	const n = 6
	dir, api, token, upload := restoreFixture(t, n)
	const link = "00000000000000000000000000000002"
	if status, m := api.json("POST", "/v1/shares", token, shareOf(link, []int{0, 1, 2, 3, 4, 5})); status != 201 {
		t.Fatalf("share: %d %v", status, m)
	}
	// Blobs the store keeps inline travel in its snapshot.
	shareSmallBlobs(t, api, token, upload, inlineLink, 3)
	backup := filepath.Join(t.TempDir(), "backup")
	mustCLI(t, "", "backup", backup, "--data", dir)

	// One blob of the backup cannot be read: the restore stops there.
	unreadable := blobPath(backup, hashHex(blob(3)))
	if err := os.Rename(unreadable, unreadable+".aside"); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(unreadable, 0o700)
	restore := append([]string{"restore", backup}, target.args()...)
	if _, _, err := runCLI(t, "", restore...); err == nil || !strings.Contains(err.Error(), "run the same restore again") {
		t.Fatalf("an interrupted restore: %v, want it to say how to continue", err)
	}
	if err := serveFails(t, target); err == nil || !strings.Contains(err.Error(), "restore that has not finished") {
		t.Fatalf("serve on an unfinished restore: %v", err)
	}
	os.Remove(unreadable)
	os.Rename(unreadable+".aside", unreadable)
	out, _ := mustCLI(t, "", restore...)
	if !strings.Contains(out, "9 blobs") || !strings.Contains(out, "start it with: sealbox serve --data "+target.Data) {
		t.Fatalf("the resumed restore said %q", out)
	}
	check, _ := mustCLI(t, "", append([]string{"check", "--deep"}, target.args()...)...)
	if !strings.HasPrefix(check, "ok:") || !strings.Contains(check, target.describeStore()) || !strings.Contains(check, target.describeBlobs()) {
		t.Fatalf("check of the restored engines: %q, want ok naming where it looked", check)
	}

	base, stop := runServeAt(t, target, func(c *server.Config) { c.ShareBurst = 1 << 20 })
	apiClient{t, base}.signIn("family@example.org", "password-family@example.org")
	for i := range n {
		resp, err := http.Get(base + "/s/" + link + "/blob/" + hashHex(blob(i)))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(got) != string(blob(i)) {
			t.Fatalf("blob %d from the restored engines: %d, %d bytes", i, resp.StatusCode, len(got))
		}
	}
	wantSmallBlobsShared(t, base, inlineLink, 3)
	stop()

	// Engines that hold an instance are refused, each on its own beside an
	// empty other, and what they hold still checks whole.
	storeFull, blobsFull := target, target
	if target.Blobs != "" {
		storeFull.Blobs = s3test.URL(t)
	} else {
		storeFull.Data = filepath.Join(t.TempDir(), "fresh")
	}
	if target.Store != "" {
		blobsFull.Store = pgtest.URL(t)
	} else {
		blobsFull.Data = filepath.Join(t.TempDir(), "fresh")
	}
	for _, tc := range []struct {
		into Location
		want string
	}{
		{storeFull, "already holds accounts or other records"},
		{blobsFull, "already holds blobs that are not from this restore"},
	} {
		if _, _, err := runCLI(t, "", append([]string{"restore", backup}, tc.into.args()...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("a restore into %+v: %v, want a refusal saying %q", tc.into, err, tc.want)
		}
	}
	if out, _ := mustCLI(t, "", append([]string{"check", "--deep"}, target.args()...)...); !strings.HasPrefix(out, "ok:") {
		t.Fatalf("check after the refused restores: %q", out)
	}
	// A data directory holding other keys is refused before anything is
	// written.
	other := engineLocation(t)
	os.MkdirAll(other.Data, 0o700)
	os.WriteFile(filepath.Join(other.Data, keyFile), bytes.Repeat([]byte{7}, 32), 0o600)
	if _, _, err := runCLI(t, "", append([]string{"restore", backup}, other.args()...)...); err == nil || !strings.Contains(err.Error(), "other than the backup's") {
		t.Fatalf("a restore over another instance's keys: %v", err)
	}
}

// TestServeRefusesALocalStoreBesideANetworkedOne: serve --store postgres://
// with a data directory that holds a store of its own refuses to start,
// naming the file and the restore command, before it connects; a store
// file that never served is no reason to refuse.
func TestServeRefusesALocalStoreBesideANetworkedOne(t *testing.T) {
	const nowhere = "postgres://sealbox@127.0.0.1:1/nowhere"
	dir, _, _, _ := restoreFixture(t, 1)
	err := serveFails(t, Location{Data: dir, Store: nowhere})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, dbFile)) || !strings.Contains(err.Error(), "sealbox restore BACKUP") {
		t.Fatalf("serve --store beside a data directory's store: %v", err)
	}
	unused := t.TempDir()
	_, stop := runServe(t, unused)
	stop()
	if err := serveFails(t, Location{Data: unused, Store: nowhere}); err == nil || strings.Contains(err.Error(), "sealbox restore BACKUP") {
		t.Fatalf("serve --store beside a store that never served: %v, want it to go on (and fail to connect)", err)
	}
}

// TestGCRefusesAnotherInstancesBlobs is the reviewer's case: gc --store
// postgres:// run without --data or --blobs in a folder holding another
// instance's ./sealbox-data refuses and deletes nothing, whether that
// instance has its marker or predates instance ids; check refuses too,
// naming both ids and where it looked.
func TestGCRefusesAnotherInstancesBlobs(t *testing.T) {
	if !pgtest.Enabled() {
		t.Skip("SEALBOX_TEST_PG is not set")
	}
	networked := Location{Data: t.TempDir(), Store: pgtest.URL(t)}
	base, stop := runServeAt(t, networked, openRegistration)
	apiClient{t, base}.account("networked@example.org")
	stop()

	folder := t.TempDir()
	other := filepath.Join(folder, DefaultDataDir)
	os.Mkdir(other, 0o700)
	base, stop = runServe(t, other, openRegistration)
	api := apiClient{t, base}
	token, upload := api.account("other@example.org")
	for i := range 7 {
		if status := api.put(token, upload, blob(i)); status != 201 {
			t.Fatalf("put %d: %d", i, status)
		}
	}
	stop()
	before := treeOf(t, filepath.Join(other, blobsDir))
	t.Chdir(folder)
	for _, tc := range []struct {
		name   string
		damage func()
		want   string
	}{
		{"marked by the other instance", func() {}, "belongs to instance"},
		{"from before instance ids", func() { os.Remove(filepath.Join(other, blobsDir, blobs.InstanceMarker)) }, "no " + blobs.InstanceMarker + " marker"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.damage()
			_, _, err := runCLI(t, "", "gc", "--grace", "0s", "--store", networked.Store)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), filepath.Join(DefaultDataDir, blobsDir)) {
				t.Fatalf("gc on another instance's blobs: %v, want a refusal saying %q and where it looked", err, tc.want)
			}
			_, _, err = runCLI(t, "", "check", "--store", networked.Store)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("check on another instance's blobs: %v", err)
			}
		})
	}
	after := treeOf(t, filepath.Join(other, blobsDir))
	delete(before, blobs.InstanceMarker)
	if len(after) != len(before) || len(after) < 7 {
		t.Fatalf("the other instance's blobs: %d files before, %d after", len(before), len(after))
	}
}

// TestFailedFirstStartLeavesNothing: a first start whose bucket cannot be
// reached, or whose certificate is missing, fails before it creates the
// data directory or binds the store to keys; a store bound by a first start that failed later (it never served)
// is bound again to the keys of the next, which says so.
func TestFailedFirstStartLeavesNothing(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "nobody")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "nothing")
	loc := Location{Data: filepath.Join(t.TempDir(), "data"), Blobs: "s3://no-such-bucket?endpoint=http://127.0.0.1:1"}
	if pgtest.Enabled() {
		loc.Store = pgtest.URL(t)
	}
	err := serveFails(t, loc)
	if err == nil || !strings.Contains(err.Error(), `"no-such-bucket" at http://127.0.0.1:1`) || strings.Contains(err.Error(), "operation error") {
		t.Fatalf("a first start with an unreachable bucket: %v, want one sentence naming bucket and endpoint", err)
	}
	if _, err := os.Stat(loc.Data); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed first start created %s (%v)", loc.Data, err)
	}
	missing := filepath.Join(t.TempDir(), "missing.pem")
	s := &Serve{Location: Location{Data: loc.Data}, Listen: "127.0.0.1:0", Config: server.DefaultConfig(), TLS: TLS{CertFile: missing, KeyFile: missing}}
	if err := s.Run(context.Background()); err == nil {
		t.Fatal("a first start with a missing certificate started")
	}
	if _, err := os.Stat(loc.Data); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a first start with a missing certificate created %s (%v)", loc.Data, err)
	}
	if !pgtest.Enabled() {
		return
	}
	// A first start that bound the store and failed afterwards, its data
	// directory deleted: the next start binds the store to its own keys.
	first := Location{Data: filepath.Join(t.TempDir(), "first"), Store: loc.Store}
	_, stop := runServeAt(t, first)
	stop()
	os.RemoveAll(first.Data)
	var logged strings.Builder
	base, stop := runServeAt(t, first, openRegistration, func(c *server.Config) { c.Log = zerolog.New(&logged) })
	apiClient{t, base}.account("late@example.org")
	stop()
	if !strings.Contains(logged.String(), "never served") {
		t.Fatalf("a re-bound store was not logged:\n%s", logged.String())
	}
}

// TestRestartReleasesItsLeases: a node killed mid-PATCH leaves the
// transfer's lease in the networked store; the same node (same data
// directory) restarted releases it at start, so the client's resumed PATCH
// is not refused for --tus-lease. The node's id is kept in its data
// directory, and one process at a time may be that node.
func TestRestartReleasesItsLeases(t *testing.T) {
	if !pgtest.Enabled() {
		t.Skip("SEALBOX_TEST_PG is not set")
	}
	loc := Location{Data: t.TempDir(), Store: pgtest.URL(t)}
	base, stop := runServeAt(t, loc, openRegistration)
	api := apiClient{t, base}
	token, upload := api.account("tus@example.org")
	data := blob(9)
	transfer := createTransfer(t, base, token, upload, data)
	stop()
	nodeID, err := os.ReadFile(filepath.Join(loc.Data, nodeIDFile))
	if err != nil || len(strings.TrimSpace(string(nodeID))) == 0 {
		t.Fatalf("the node id: %q %v", nodeID, err)
	}
	// What the killed run left: its lease on the transfer.
	store, err := loc.openStore(context.Background(), kv.Options{}, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if held, err := store.TryLease("tus/"+filepath.Base(transfer), strings.TrimSpace(string(nodeID))+"/killed-run/1", server.DefaultConfig().TusLeaseTTL); err != nil || !held {
		t.Fatalf("the killed run's lease: %v %v", held, err)
	}
	store.Close()

	base, stop = runServeAt(t, loc)
	defer stop()
	resp := tusRequest(t, "PATCH", base+transfer, token, data, map[string]string{"Upload-Offset": "0", "Content-Type": "application/offset+octet-stream"})
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("the resumed PATCH after the restart: %d (Retry-After %q), want 204 at once", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if again, _ := os.ReadFile(filepath.Join(loc.Data, nodeIDFile)); string(again) != string(nodeID) {
		t.Fatalf("the node id changed across restarts: %q, then %q", nodeID, again)
	}
	// A second process on the same data directory would be the same node,
	// and release the running one's claims: it is refused.
	if err := serveFails(t, loc); err == nil || !strings.Contains(err.Error(), "another sealbox serve runs on this data directory") {
		t.Fatalf("a second serve on one data directory: %v", err)
	}
}

// createTransfer creates a tus transfer of data in upload and returns its
// path.
func createTransfer(t *testing.T, base, token, upload string, data []byte) string {
	t.Helper()
	resp := tusRequest(t, "POST", base+"/v1/uploads/"+upload+"/tus", token, nil, map[string]string{
		"Upload-Length":   strconv.Itoa(len(data)),
		"Upload-Metadata": "hash " + base64.StdEncoding.EncodeToString([]byte(hashHex(data))),
	})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create a transfer: %d", resp.StatusCode)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return loc.Path
}

// tusRequest sends one tus request and returns its answer, body read.
func tusRequest(t *testing.T, method, url, token string, body []byte, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Tus-Resumable", "1.0.0")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestServeCreatesAMissingBucket: serve on a bucket that does not exist yet
// creates it and says so.
func TestServeCreatesAMissingBucket(t *testing.T) {
	if !s3test.Enabled() {
		t.Skip("SEALBOX_TEST_S3 is not set")
	}
	u, _ := url.Parse(s3test.URL(t))
	u.Host += "-new"
	var logged strings.Builder
	_, stop := runServeAt(t, Location{Data: t.TempDir(), Blobs: u.String()}, func(c *server.Config) { c.Log = zerolog.New(&logged) })
	stop()
	if !strings.Contains(logged.String(), "the bucket did not exist; created it") || !strings.Contains(logged.String(), u.Host) {
		t.Fatalf("serve on a missing bucket did not say it created it:\n%s", logged.String())
	}
}

// TestServeRefusesAnotherInstancesBlobs: serve on a data directory whose
// blobs directory is another instance's refuses, marker or not, and
// changes nothing; a data directory from before instance ids is given one
// id, in its store and its blobs directory, at its first start. (A refused
// start may leave an empty blobs/tmp: it changes and removes no blob.)
func TestServeRefusesAnotherInstancesBlobs(t *testing.T) {
	a, _, _, _ := restoreFixture(t, 2)
	b := t.TempDir()
	copyDir(t, format0Dir, b)
	_, stop := runServe(t, b)
	stop()
	marker, err := os.ReadFile(filepath.Join(b, blobsDir, blobs.InstanceMarker))
	if err != nil || len(strings.TrimSpace(string(marker))) == 0 {
		t.Fatalf("the first start of a data directory from before instance ids left no marker: %q %v", marker, err)
	}
	mixed := t.TempDir()
	copyDir(t, b, mixed)
	os.RemoveAll(filepath.Join(mixed, blobsDir))
	copyDir(t, filepath.Join(a, blobsDir), filepath.Join(mixed, blobsDir))
	before := treeOf(t, filepath.Join(mixed, blobsDir))
	if err := serveFails(t, Location{Data: mixed}); err == nil || !strings.Contains(err.Error(), "belongs to instance") {
		t.Fatalf("serve on another instance's blobs directory: %v", err)
	}
	os.Remove(filepath.Join(mixed, blobsDir, blobs.InstanceMarker))
	delete(before, blobs.InstanceMarker)
	if err := serveFails(t, Location{Data: mixed}); err == nil || !strings.Contains(err.Error(), "no "+blobs.InstanceMarker+" marker") {
		t.Fatalf("serve on an unmarked blobs directory holding blobs: %v", err)
	}
	after := treeOf(t, filepath.Join(mixed, blobsDir))
	for name, was := range before {
		if after[name] != was {
			t.Fatalf("a refused start changed %s", name)
		}
	}
}

// TestRefusedStartWritesNoKeys: a node whose keys are missing beside a
// store that has served is refused before it writes the keys and node id
// it made, in the data directory of a local store and beside PostgreSQL
// (where the data directory is not even created), as the README promises
// of a failed start; so is a first start refused for another instance's
// blobs.
func TestRefusedStartWritesNoKeys(t *testing.T) {
	served := func(loc Location) {
		t.Helper()
		base, stop := runServeAt(t, loc, openRegistration)
		api := apiClient{t, base}
		token, upload := api.account("family@example.org")
		if status := api.put(token, upload, blob(0)); status != 201 {
			t.Fatalf("put: %d", status)
		}
		stop()
	}
	made := []string{keyFile, admin.LogKeyFile, nodeIDFile}
	local := Location{Data: t.TempDir()}
	served(local)
	for _, name := range made {
		if err := os.Remove(filepath.Join(local.Data, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := serveFails(t, local); err == nil || !errors.Is(err, kv.ErrKeysDiffer) || !strings.Contains(err.Error(), "refusing to start") {
		t.Fatalf("a start without the store's keys: %v", err)
	}
	wantNone := func(dir string) {
		t.Helper()
		for _, name := range made {
			if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
				t.Errorf("the refused start wrote %s (%v)", name, err)
			}
		}
	}
	wantNone(local.Data)
	mixed := t.TempDir()
	copyDir(t, filepath.Join(local.Data, blobsDir), filepath.Join(mixed, blobsDir))
	if err := serveFails(t, Location{Data: mixed}); err == nil || !strings.Contains(err.Error(), "belongs to instance") {
		t.Fatalf("a first start beside another instance's blobs: %v", err)
	}
	wantNone(mixed)
	if !pgtest.Enabled() {
		return
	}
	first := Location{Data: filepath.Join(t.TempDir(), "first"), Store: pgtest.URL(t)}
	served(first)
	other := Location{Data: filepath.Join(t.TempDir(), "other"), Store: first.Store}
	if err := serveFails(t, other); err == nil || !errors.Is(err, kv.ErrKeysDiffer) {
		t.Fatalf("a node without the keys of a store that served: %v", err)
	}
	if _, err := os.Stat(other.Data); !os.IsNotExist(err) {
		t.Fatalf("the refused start created %s (%v)", other.Data, err)
	}
}

// TestRestoreCreatesNoBucketBeforeItsChecks: restore into a bucket that does
// not exist creates it only once everything else has been checked: a
// database that cannot be reached, or a backup that is not whole, leaves no
// bucket behind; a restore that passes creates it and says so.
func TestRestoreCreatesNoBucketBeforeItsChecks(t *testing.T) {
	if !s3test.Enabled() {
		t.Skip("SEALBOX_TEST_S3 is not set")
	}
	dir, api, token, upload := restoreFixture(t, 1)
	shareSmallBlobs(t, api, token, upload, inlineLink, 1)
	backup := filepath.Join(t.TempDir(), "backup")
	mustCLI(t, "", "backup", backup, "--data", dir)
	damaged := filepath.Join(t.TempDir(), "damaged")
	mustCLI(t, "", "backup", damaged, "--data", dir)
	flipStoredBytes(t, filepath.Join(damaged, dbFile), smallBlob(0))

	u, err := url.Parse(s3test.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.Host = "missing-" + u.Host
	missing := u.String()
	wantNoBucket := func(after string) {
		t.Helper()
		if _, err := s3.Open(context.Background(), missing, s3.Options{}); !errors.Is(err, s3.ErrNoBucket) {
			t.Fatalf("after %s the bucket: %v, want it still missing", after, err)
		}
	}
	unreachable := Location{Data: filepath.Join(t.TempDir(), "a"), Store: "postgres://sealbox:wrong@127.0.0.1:1/sealbox", Blobs: missing}
	if _, _, err := runCLI(t, "", append([]string{"restore", backup}, unreachable.args()...)...); err == nil || !strings.Contains(err.Error(), "PostgreSQL") {
		t.Fatalf("a restore whose database cannot be reached: %v", err)
	}
	wantNoBucket("a restore whose database cannot be reached")
	into := Location{Data: filepath.Join(t.TempDir(), "b"), Blobs: missing}
	if _, _, err := runCLI(t, "", append([]string{"restore", damaged}, into.args()...)...); err == nil || !strings.Contains(err.Error(), "is not whole") {
		t.Fatalf("a restore of a damaged backup: %v", err)
	}
	wantNoBucket("a restore of a damaged backup")
	into.Data = filepath.Join(t.TempDir(), "c")
	_, errOut := mustCLI(t, "", append([]string{"restore", backup}, into.args()...)...)
	if !strings.Contains(errOut, "did not exist") || !strings.Contains(errOut, "created it") {
		t.Fatalf("the restore did not say it created the bucket: %q", errOut)
	}
}

// TestRefusedStartCreatesNoBucket: serve on a bucket that does not exist
// creates it only once everything else has been checked: a start refused
// for keys that are not the store's leaves no bucket behind.
func TestRefusedStartCreatesNoBucket(t *testing.T) {
	if !s3test.Enabled() {
		t.Skip("SEALBOX_TEST_S3 is not set")
	}
	dir := t.TempDir()
	base, stop := runServe(t, dir, openRegistration)
	apiClient{t, base}.account("family@example.org")
	stop()
	for _, name := range []string{keyFile, admin.LogKeyFile, nodeIDFile} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	u, err := url.Parse(s3test.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.Host = "missing-" + u.Host
	if err := serveFails(t, Location{Data: dir, Blobs: u.String()}); err == nil || !errors.Is(err, kv.ErrKeysDiffer) {
		t.Fatalf("a start without the store's keys: %v", err)
	}
	if _, err := s3.Open(context.Background(), u.String(), s3.Options{}); !errors.Is(err, s3.ErrNoBucket) {
		t.Fatalf("after the refused start the bucket: %v, want it still missing", err)
	}
}
