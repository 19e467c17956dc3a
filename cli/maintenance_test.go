package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/bolt"
	"sealbox/kv/fault"
	"sealbox/kv/pgtest"
	"sealbox/server"
	"sealbox/server/servertest"
)

func openRegistration(c *server.Config) { c.Registration = "open" }

// apiClient drives the HTTP API of a test server with servertest's Client.
type apiClient struct {
	t   *testing.T
	url string
}

// do sends body (none when empty) and returns the status and the answer
// decoded as a JSON object (nil when it is none). A transport error fails
// the test without stopping it, so writer goroutines may call do.
func (c apiClient) do(method, path, token, contentType string, body []byte) (int, map[string]any) {
	req := servertest.Req{Method: method, Path: path, Token: token, ContentType: contentType}
	if len(body) > 0 {
		req.Body = body
	}
	r, err := servertest.Client{BaseURL: c.url}.Send(req)
	if err != nil {
		c.t.Error(err)
		return 0, nil
	}
	var m map[string]any
	json.Unmarshal(r.Body, &m)
	return r.Status, m
}

func (c apiClient) json(method, path, token string, body any) (int, map[string]any) {
	raw, _ := json.Marshal(body)
	return c.do(method, path, token, "application/json", raw)
}

// account registers email and opens an upload session in a new album.
func (c apiClient) account(email string) (token, upload string) {
	status, m := c.json("POST", "/v1/auth/register", "", map[string]string{"email": email, "password": "password-" + email})
	if status != 200 {
		c.t.Fatalf("register %s: %d %v", email, status, m)
	}
	token = m["access_token"].(string)
	album := hashHex([]byte(email))[:8] + "-0000-4000-8000-000000000000"
	if status, m := c.json("POST", "/v1/albums", token, map[string]string{"album_id": album}); status != 201 {
		c.t.Fatalf("album: %d %v", status, m)
	}
	status, m = c.do("POST", "/v1/albums/"+album+"/uploads", token, "", nil)
	if status != 201 {
		c.t.Fatalf("upload session: %d %v", status, m)
	}
	return token, m["upload_id"].(string)
}

func (c apiClient) put(token, upload string, data []byte) int {
	sum := sha256.Sum256(data)
	status, _ := c.do("PUT", "/v1/uploads/"+upload+"/blobs/"+hex.EncodeToString(sum[:]), token, "application/octet-stream", data)
	return status
}

// blob is the i-th test blob, 17 KiB or more: past the default
// --inline-max, so it is a file of the blob store, which the maintenance
// tests remove, corrupt and copy.
func blob(i int) []byte { return bytes.Repeat([]byte(fmt.Sprintf("blob %d;", i)), 2500) }

// smallBlob is the i-th test blob of a few KiB, which the store keeps
// inline.
func smallBlob(i int) []byte { return bytes.Repeat([]byte(fmt.Sprintf("small %d;", i)), 300) }

func hashHex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func blobPath(dir, hash string) string {
	return filepath.Join(dir, "blobs", hash[:2], hash[2:4], hash)
}

// TestBackupWhileWritingThenRestore: a backup taken while a writer runs
// holds every write acknowledged before the backup started; of the writes
// that ran alongside it, the snapshot may or may not hold each (that is a
// race, so nothing is asserted about which), but every one it holds is
// whole. The restored directory passes check --deep, and a server started
// on it serves all of that.
func TestBackupWhileWritingThenRestore(t *testing.T) {
	dir, dest := t.TempDir(), filepath.Join(t.TempDir(), "backup")
	api := apiClient{t, startServe(t, dir, openRegistration)}
	token, upload := api.account("writer@example.org")
	email := func(i int) string { return fmt.Sprintf("u%d@example.org", i) }

	// Write i puts blob(i) and registers email(i); the ledger records how
	// many writes were tried and which were acknowledged.
	var (
		mu                      sync.Mutex
		tried                   int
		ackedBlob, ackedAccount = map[int]bool{}, map[int]bool{}
	)
	const warmUp = 10
	warm, stop := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			mu.Lock()
			tried++
			mu.Unlock()
			blobOK := api.put(token, upload, blob(i)) == 201
			status, _ := api.json("POST", "/v1/auth/register", "", map[string]string{"email": email(i), "password": "password-x"})
			mu.Lock()
			ackedBlob[i], ackedAccount[i] = blobOK, status == 200
			mu.Unlock()
			if i == warmUp-1 {
				close(warm)
			}
		}
	}()
	select {
	case <-warm:
	case <-time.After(10 * time.Second):
		t.Fatal("the writer made no progress")
	}
	mu.Lock()
	blobsBefore, accountsBefore := maps.Clone(ackedBlob), maps.Clone(ackedAccount)
	mu.Unlock()
	var before []int
	for i, ok := range blobsBefore {
		if ok {
			before = append(before, i)
		}
	}
	if len(before) == 0 {
		t.Fatal("no blob was acknowledged before the backup")
	}
	// A share link over those blobs is one more acknowledged record, and
	// how the restored server reads them back.
	const link = "0123456789abcdef0123456789abcdef"
	if status, m := api.json("POST", "/v1/shares", token, shareOf(link, before)); status != 201 {
		t.Fatalf("share: %d %v", status, m)
	}
	out, progress := mustCLI(t, "", "backup", dest, "--data", dir)
	close(stop)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if !strings.Contains(out, "backup written to "+dest) || !strings.Contains(progress, "backup: 100%") {
		t.Fatalf("backup output: %q / %q", out, progress)
	}
	for _, name := range []string{"sealbox.db", "server.key"} {
		if _, err := os.Stat(filepath.Join(dest, name)); err != nil {
			t.Fatalf("backup lacks %s: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dest, "sealbox.db.tmp")); err == nil {
		t.Fatal("the snapshot's temporary file was left behind")
	}
	if out, _ := mustCLI(t, "", "check", "--deep", "--data", dest); !strings.HasPrefix(out, "ok:") {
		t.Fatalf("check of the backup: %q", out)
	}

	// Restore = point the server at the backup. Every blob is read through
	// a share link, more reads than one address's default burst.
	restored := apiClient{t, startServe(t, dest, func(c *server.Config) { c.ShareBurst = 1 << 20 })}
	readBack := func(link string, blobs []int) {
		t.Helper()
		for _, i := range blobs {
			resp, err := http.Get(restored.url + "/s/" + link + "/blob/" + hashHex(blob(i)))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !bytes.Equal(got, blob(i)) {
				t.Errorf("blob %d through the restored share link: %d, %d bytes, want %d identical ones", i, resp.StatusCode, len(got), len(blob(i)))
			}
		}
	}
	readBack(link, before)
	// The other blobs are read through a link of their own each, which the
	// restored server makes only if the writer holds the blob there.
	owner := restored.signIn("writer@example.org", "password-writer@example.org")
	held := 0
	for i := range tried {
		if blobsBefore[i] {
			continue
		}
		link := fmt.Sprintf("%032x", i)
		status, m := restored.json("POST", "/v1/shares", owner, shareOf(link, []int{i}))
		switch {
		case status == 201:
			held++
			readBack(link, []int{i})
		case m["code"] != fault.ECodeShareBlobNotOwned:
			t.Fatalf("share of blob %d on the restored server: %d %v", i, status, m)
		}
	}
	listed := map[string]bool{}
	for _, u := range usersJSON(t, dest) {
		listed[u.Email] = true
	}
	registered := 0
	for i := range tried {
		switch {
		case listed[email(i)]:
			registered++
			if got := login(t, restored.url, email(i), "password-x"); got != 200 {
				t.Errorf("login of %s on the restored server: %d", email(i), got)
			}
		case accountsBefore[i]:
			t.Errorf("the backup lacks %s, registered before it started", email(i))
		}
	}
	t.Logf("%d writes tried, %d blobs acknowledged before the backup; it holds those, %d other blobs and %d accounts",
		tried, len(before), held, registered)
}

// shareOf is the body of a share link over blobs.
func shareOf(link string, blobs []int) map[string]any {
	serves := make([]string, len(blobs))
	for n, i := range blobs {
		serves[n] = hashHex(blob(i))
	}
	return map[string]any{"opaque_id": link, "metadata_hash": serves[0], "serves": serves}
}

func TestIncrementalBackupCopiesOnlyNewBlobs(t *testing.T) {
	dir, dest := t.TempDir(), filepath.Join(t.TempDir(), "backup")
	api := apiClient{t, startServe(t, dir, openRegistration)}
	token, upload := api.account("inc@example.org")
	for i := 0; i < 10; i++ {
		api.put(token, upload, blob(i))
	}
	out, _ := mustCLI(t, "", "backup", dest, "--data", dir)
	if !strings.Contains(out, "10 blobs copied") {
		t.Fatalf("first backup: %q", out)
	}
	for i := 10; i < 13; i++ {
		api.put(token, upload, blob(i))
	}
	out, _ = mustCLI(t, "", "backup", dest, "--data", dir)
	if !strings.Contains(out, "3 blobs copied") || !strings.Contains(out, "10 already there") {
		t.Fatalf("incremental backup: %q", out)
	}
}

func TestBackupRefusesTheDataDirectory(t *testing.T) {
	dir := t.TempDir()
	startServe(t, dir)
	if _, _, err := runCLI(t, "", "backup", dir, "--data", dir); err == nil {
		t.Fatal("a backup into the data directory itself was accepted")
	}
}

func TestCheckFindsMissingAndCorruptBlobs(t *testing.T) {
	dir := t.TempDir()
	api := apiClient{t, startServe(t, dir, openRegistration)}
	token, upload := api.account("chk@example.org")
	for i := 0; i < 3; i++ {
		api.put(token, upload, blob(i))
	}
	if out, _ := mustCLI(t, "", "check", "--data", dir); !strings.HasPrefix(out, "ok:") {
		t.Fatalf("clean check: %q", out)
	}
	if err := os.Remove(blobPath(dir, hashHex(blob(0)))); err != nil {
		t.Fatal(err)
	}
	corrupt := blobPath(dir, hashHex(blob(1)))
	data, _ := os.ReadFile(corrupt)
	data[0] ^= 0xff
	if err := os.WriteFile(corrupt, data, 0o600); err != nil {
		t.Fatal(err)
	}
	// A blob cut short (a write through a second name once could) is
	// caught without --deep: its size differs from the recorded one.
	if err := os.WriteFile(blobPath(dir, hashHex(blob(2))), []byte("JUNK"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLI(t, "", "check", "--data", dir)
	if err == nil || !strings.Contains(out, hashHex(blob(0))+": referenced but missing") || strings.Contains(out, hashHex(blob(1))) ||
		!strings.Contains(out, fmt.Sprintf("%s: 4 bytes on disk, %d recorded", hashHex(blob(2)), len(blob(2)))) {
		t.Fatalf("shallow check: %v %q", err, out)
	}
	out, _, err = runCLI(t, "", "check", "--deep", "--data", dir)
	if err == nil || !strings.Contains(out, hashHex(blob(1))+": its bytes no longer hash to its name") {
		t.Fatalf("deep check: %v %q", err, out)
	}
}

func TestGCRemovesOnlyOldOrphans(t *testing.T) {
	dir := t.TempDir()
	// The server's clock, to expire its records; its own sweep waits an
	// hour, so only gc removes them.
	var ahead atomic.Int64
	clock := func(c *server.Config) {
		c.Now = func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	}
	hourly := func(s *Serve) { s.Maintenance.Interval = time.Hour }
	url, stop := runServeWith(t, Location{Data: dir}, hourly, openRegistration, clock)
	t.Cleanup(stop)
	api := apiClient{t, url}
	token, upload := api.account("gc@example.org")
	api.put(token, upload, blob(1))
	// Orphans: files in the blob store that no account holds, one old and
	// one fresh (an upload in progress).
	old, fresh := blob(100), blob(101)
	for _, b := range [][]byte{old, fresh} {
		p := blobPath(dir, hashHex(b))
		os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-48 * time.Hour)
	os.Chtimes(blobPath(dir, hashHex(old)), long, long)
	os.Chtimes(blobPath(dir, hashHex(blob(1))), long, long)
	// A partial file of a transfer the store no longer records, old enough
	// to be abandoned, and a fresh one.
	partials := filepath.Join(dir, "blobs", "tus")
	os.MkdirAll(partials, 0o700)
	for name, when := range map[string]time.Time{"abandoned": long, "fresh": time.Now()} {
		p := filepath.Join(partials, name)
		os.WriteFile(p, []byte("partial bytes"), 0o600)
		os.Chtimes(p, when, when)
	}

	// Temp files of interrupted Puts, one old and one fresh.
	for name, when := range map[string]time.Time{"put-old": long, "put-fresh": time.Now()} {
		p := filepath.Join(dir, "blobs", "tmp", name)
		os.WriteFile(p, []byte("temp bytes"), 0o600)
		os.Chtimes(p, when, when)
	}
	// Past every session's and the upload session's expiry.
	ahead.Store(int64(1000 * time.Hour))

	dry, _ := mustCLI(t, "", "gc", "--dry-run", "--data", dir)
	if !strings.Contains(dry, "would remove 1 unreferenced blobs") || !strings.Contains(dry, "1 abandoned partial uploads") {
		t.Fatalf("dry run: %q", dry)
	}
	for _, p := range []string{blobPath(dir, hashHex(old)), filepath.Join(partials, "abandoned"), filepath.Join(dir, "blobs", "tmp", "put-old")} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("a dry run removed %s", p)
		}
	}
	out, _ := mustCLI(t, "", "gc", "--data", dir)
	if !strings.Contains(out, "removed 1 unreferenced blobs") || !strings.Contains(out, "1 abandoned partial uploads") {
		t.Fatalf("gc: %q", out)
	}
	// The dry run counted the temp files and expired records gc then
	// removed, rather than reporting none.
	counts := regexp.MustCompile(`(\d+) temp files, (\d+) expired records`)
	predicted, done := counts.FindStringSubmatch(dry), counts.FindStringSubmatch(out)
	if predicted == nil || done == nil || !slices.Equal(predicted[1:], done[1:]) || done[1] != "1" || done[2] == "0" {
		t.Fatalf("temp files and expired records: dry run %q, gc %q", dry, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "blobs", "tmp", "put-fresh")); err != nil {
		t.Fatal("gc removed a fresh temp file")
	}
	if _, err := os.Stat(filepath.Join(partials, "abandoned")); err == nil {
		t.Fatal("an abandoned partial file survived gc")
	}
	if _, err := os.Stat(filepath.Join(partials, "fresh")); err != nil {
		t.Fatal("gc removed a fresh partial file")
	}
	for b, want := range map[string]bool{hashHex(old): false, hashHex(fresh): true, hashHex(blob(1)): true} {
		if _, err := os.Stat(blobPath(dir, b)); (err == nil) != want {
			t.Errorf("blob %s present=%v, want %v", b[:8], err == nil, want)
		}
	}
	if out, _ := mustCLI(t, "", "check", "--deep", "--data", dir); !strings.HasPrefix(out, "ok:") {
		t.Fatalf("check after gc: %q", out)
	}
}

func TestMaintenanceDirectlyOnTheStore(t *testing.T) {
	dir, dest := t.TempDir(), filepath.Join(t.TempDir(), "backup")
	func() {
		ready := startServe(t, dir, openRegistration)
		api := apiClient{t, ready}
		token, upload := api.account("direct@example.org")
		api.put(token, upload, blob(7))
	}()
	// The server from startServe stops at the end of the test, so work on a
	// copy of its data directory that no process holds.
	copyDir := t.TempDir()
	mustCLI(t, "", "backup", copyDir+"/snap", "--data", dir)
	out, how := mustCLI(t, "", "backup", dest, "--data", copyDir+"/snap")
	if !strings.Contains(how, "directly") || !strings.Contains(out, "1 blobs copied") {
		t.Fatalf("direct backup: %q %q", how, out)
	}
	if out, _ := mustCLI(t, "", "check", "--deep", "--data", dest); !strings.HasPrefix(out, "ok:") {
		t.Fatalf("direct check: %q", out)
	}
	if out, _ := mustCLI(t, "", "gc", "--data", dest); !strings.Contains(out, "removed 0 unreferenced blobs") {
		t.Fatalf("direct gc: %q", out)
	}
}

// TestReadOnlyCommandsRefuseAMissingStore: check, users list, gc --dry-run
// and backup only read the data directory. Given one that holds no store
// (empty, or not there at all) they refuse, exit non-zero and create
// nothing, instead of creating an empty store and reporting on it.
func TestReadOnlyCommandsRefuseAMissingStore(t *testing.T) {
	commands := [][]string{
		{"check"}, {"check", "--deep"}, {"users", "list"}, {"users", "list", "--json"}, {"gc", "--dry-run"}, {"backup", "DEST"},
	}
	for _, missing := range []bool{false, true} {
		for _, args := range commands {
			dir, dest := t.TempDir(), filepath.Join(t.TempDir(), "backup")
			if missing {
				dir = filepath.Join(dir, "none")
			}
			args = append(slices.Clone(args), "--data", dir)
			if i := slices.Index(args, "DEST"); i >= 0 {
				args[i] = dest
			}
			name := strings.Join(args[:len(args)-2], " ")
			_, _, err := runCLI(t, "", args...)
			if err == nil || !strings.Contains(err.Error(), "holds no sealbox store") {
				t.Errorf("%s on a directory without a store (missing=%v): got %v, want a refusal", name, missing, err)
			}
			entries, statErr := os.ReadDir(dir)
			if missing && !errors.Is(statErr, fs.ErrNotExist) {
				t.Errorf("%s created the missing data directory", name)
			}
			if !missing && len(entries) != 0 {
				t.Errorf("%s created %v in the empty data directory", name, entries)
			}
			if _, err := os.Stat(dest); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s created the backup destination", name)
			}
		}
	}
	if code := Execute([]string{"check", "--data", t.TempDir()}); code == 0 {
		t.Error("check of an empty directory exits 0")
	}
}

// TestReadOnlyCommandsWriteNothing: checking a backup (or a data
// directory) directly leaves every byte of it as it was.
func TestReadOnlyCommandsWriteNothing(t *testing.T) {
	dir, dest := t.TempDir(), filepath.Join(t.TempDir(), "backup")
	api := apiClient{t, startServe(t, dir, openRegistration)}
	token, upload := api.account("ro@example.org")
	api.put(token, upload, blob(1))
	mustCLI(t, "", "backup", dest, "--data", dir)
	before := treeOf(t, dest)
	for _, args := range [][]string{
		{"check", "--deep"}, {"users", "list"}, {"gc", "--dry-run"}, {"backup", filepath.Join(t.TempDir(), "copy")},
	} {
		_, how := mustCLI(t, "", append(args, "--data", dest)...)
		if !strings.Contains(how, "directly") {
			t.Fatalf("%v did not work directly on the backup: %q", args, how)
		}
		if after := treeOf(t, dest); !maps.Equal(before, after) {
			t.Fatalf("%v changed the backup:\nbefore %v\nafter  %v", args, before, after)
		}
	}
}

// treeOf maps every path under dir to its type and, for a file, the hash
// of its bytes.
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	tree := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			tree[rel] = "dir"
			return nil
		}
		data, err := os.ReadFile(path)
		tree[rel] = hashHex(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// TestAdminCommandsReadSealboxData: like serve, every admin command takes
// its data directory from SEALBOX_DATA when --data is not given, and --data
// wins over it.
func TestAdminCommandsReadSealboxData(t *testing.T) {
	// The default ./sealbox-data must not be what the commands find.
	t.Chdir(t.TempDir())
	dir, dest := t.TempDir(), filepath.Join(t.TempDir(), "backup")
	t.Setenv("SEALBOX_DATA", dir)
	for _, tc := range []struct {
		args  []string
		stdin string
		want  string
	}{
		{[]string{"users", "add", "env@example.org", "--password-stdin"}, "longenough1\n", "added env@example.org"},
		{[]string{"users", "set-quota", "env@example.org", "1GiB"}, "", "quota set for env@example.org"},
		{[]string{"users", "list"}, "", "env@example.org"},
		{[]string{"check"}, "", "ok:"},
		{[]string{"gc", "--dry-run"}, "", "would remove 0 unreferenced blobs"},
		{[]string{"backup", dest}, "", "backup written to " + dest},
	} {
		out, how, err := runCLI(t, tc.stdin, tc.args...)
		if err != nil || !strings.Contains(how, "working on "+dir+" directly") || !strings.Contains(out, tc.want) {
			t.Errorf("sealbox %s with SEALBOX_DATA: %v\n%s%s", strings.Join(tc.args, " "), err, how, out)
		}
	}
	if _, err := os.Stat(DefaultDataDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a command used the default data directory: %v", err)
	}
	other := t.TempDir()
	if _, _, err := runCLI(t, "", "users", "list", "--data", other); err == nil || !strings.Contains(err.Error(), other) {
		t.Errorf("--data %s must win over SEALBOX_DATA: got %v", other, err)
	}
}

// TestServeRunsMaintenance: serve starts the maintenance runner beside the
// server, which deletes expired records and the partial files of the
// transfers they took with them, and stops it on shutdown, giving up the
// sweep lease so another node sweeps at once.
func TestServeRunsMaintenance(t *testing.T) {
	dir := t.TempDir()
	var ahead atomic.Int64
	clock := func(c *server.Config) {
		c.Now = func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	}
	often := func(s *Serve) { s.Maintenance.Interval = 10 * time.Millisecond }
	// On PostgreSQL the lease outlives the process; a reopened bbolt file
	// drops every lease a dead process left, so there the last check
	// passes either way.
	loc := Location{Data: dir}
	if pgtest.Enabled() {
		loc.Store = pgtest.URL(t)
	}
	base, stop := runServeWith(t, loc, often, openRegistration, clock)
	t.Cleanup(stop)
	api := apiClient{t, base}
	token, upload := api.account("sweep@example.org")
	data := blob(3)
	transfer := createTransfer(t, base, token, upload, data)
	resp := tusRequest(t, "PATCH", base+transfer, token, data[:100], map[string]string{"Upload-Offset": "0", "Content-Type": "application/offset+octet-stream"})
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PATCH: %d", resp.StatusCode)
	}
	partial := filepath.Join(dir, "blobs", "tus", filepath.Base(transfer))
	if _, err := os.Stat(partial); err != nil {
		t.Fatalf("the transfer's partial file: %v", err)
	}
	ahead.Store(int64(2 * time.Hour))            // the upload session expired
	deadline := time.Now().Add(10 * time.Second) // a wait for the runner's ticks, not for an expiry
	for {
		if _, err := os.Stat(partial); errors.Is(err, fs.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("serve's maintenance left the partial file of an expired transfer")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	store, err := loc.openStore(context.Background(), kv.Options{}, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if holder, _, err := store.LeaseHolder("sweep"); err != nil || holder != "" {
		t.Fatalf("after shutdown the sweep lease is held by %q (%v)", holder, err)
	}
}

// TestCheckFindsADamagedKey: check reads the data directory's keys as
// restore does, so a key file that is a directory, or not a key, is a
// problem and not "ok".
func TestCheckFindsADamagedKey(t *testing.T) {
	dir := t.TempDir()
	startServe(t, dir)
	key := filepath.Join(dir, keyFile)
	if err := os.Remove(key); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(key, 0o700); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLI(t, "", "check", "--data", dir)
	if err == nil || !strings.Contains(out, "problem: keys: "+key+" is not a regular file") {
		t.Fatalf("check with server.key a directory: %v %q", err, out)
	}
	os.Remove(key)
	if err := os.WriteFile(key, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err = runCLI(t, "", "check", "--data", dir)
	if err == nil || !strings.Contains(out, "problem: keys: "+key+" holds 5 bytes, and a server key holds 32: refused") {
		t.Fatalf("check with a short server.key: %v %q", err, out)
	}
}
