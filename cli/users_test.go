package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"
	"github.com/rs/zerolog"

	"sealbox/cli/admin"
	"sealbox/cli/sealed"
	"sealbox/kv"
	"sealbox/kv/kvtest"
	"sealbox/server"
	"sealbox/server/password"
	"sealbox/server/servertest"
)

// runCLI runs the sealbox command line in-process and returns its output.
func runCLI(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := NewRootCmd()
	var out, errOut bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	err = cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func mustCLI(t *testing.T, stdin string, args ...string) (string, string) {
	t.Helper()
	out, errOut, err := runCLI(t, stdin, args...)
	if err != nil {
		t.Fatalf("sealbox %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	return out, errOut
}

func usersJSON(t *testing.T, dir string) []admin.User {
	t.Helper()
	out, _ := mustCLI(t, "", "users", "list", "--json", "--data", dir)
	var users []admin.User
	if err := json.Unmarshal([]byte(out), &users); err != nil {
		t.Fatalf("users list --json: %v: %s", err, out)
	}
	return users
}

// startServe runs `serve` on dir with cheap password hashing and returns
// its base URL; the server stops when the test ends.
func startServe(t *testing.T, dir string, edit ...func(*server.Config)) string {
	t.Helper()
	url, stop := runServe(t, dir, edit...)
	t.Cleanup(stop)
	return url
}

// runServe is startServe for a test that stops the server itself, to work
// on its data directory directly; stop may be called more than once.
func runServe(t *testing.T, dir string, edit ...func(*server.Config)) (url string, stop func()) {
	t.Helper()
	return runServeAt(t, Location{Data: dir}, edit...)
}

// runServeAt is runServe on any location (a store in PostgreSQL, blobs in
// a bucket).
func runServeAt(t *testing.T, loc Location, edit ...func(*server.Config)) (url string, stop func()) {
	t.Helper()
	return runServeWith(t, loc, nil, edit...)
}

// testCheckpointInterval is how often the servers of the tests sign a
// checkpoint and submit it to their witnesses.
const testCheckpointInterval = 100 * time.Millisecond

// runServeWith is runServeAt with adjust, when given, applied to the Serve
// (witnesses, a metrics listener) before it runs.
func runServeWith(t *testing.T, loc Location, adjust func(*Serve), edit ...func(*server.Config)) (url string, stop func()) {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.Argon2 = password.Params{Time: 1, MemoryKiB: 64, Threads: 1}
	cfg.Registration = "closed"
	for _, e := range edit {
		e(&cfg)
	}
	s := &Serve{Location: loc, Listen: "127.0.0.1:0", Config: cfg}
	if adjust != nil {
		adjust(s)
	}
	return runServeOf(t, s)
}

// runServeOf is runServe of a Serve built by the test (other listeners,
// other flags).
func runServeOf(t *testing.T, s *Serve) (url string, stop func()) {
	t.Helper()
	ready := make(chan string, 1)
	s.Ready = func(u string) { ready <- u }
	if s.Witnessing.Interval == 0 {
		s.Witnessing.Interval = testCheckpointInterval
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		})
	}
	select {
	case u := <-ready:
		return u, stop
	case err := <-done:
		t.Fatalf("serve stopped: %v", err)
	case <-time.After(10 * time.Second):
		stop()
		t.Fatal("serve did not start")
	}
	return "", nil
}

// signIn signs in with a password alone and returns the access token.
func (c apiClient) signIn(email, pw string) string {
	c.t.Helper()
	status, m := c.json("POST", "/v1/auth/login", "", map[string]string{"email": email, "password": pw})
	if status != 200 {
		c.t.Fatalf("login of %s: %d %v", email, status, m)
	}
	return m["access_token"].(string)
}

// enrollTOTP turns on a second factor for the account of access as a user
// does: enroll, then confirm with the authenticator's current code.
func (c apiClient) enrollTOTP(access string) {
	c.t.Helper()
	status, m := c.do("POST", "/v1/auth/totp/enroll", access, "", nil)
	uri, _ := m["provisioning_uri"].(string)
	if status != 200 || uri == "" {
		c.t.Fatalf("enroll: %d %v", status, m)
	}
	key, err := otp.NewKeyFromURL(uri)
	if err != nil {
		c.t.Fatal(err)
	}
	code, err := totp.GenerateCode(key.Secret(), time.Now())
	if err != nil {
		c.t.Fatal(err)
	}
	if status, m := c.json("POST", "/v1/auth/totp/verify-enrollment", access, map[string]string{"totp_code": code}); status != 204 {
		c.t.Fatalf("verify-enrollment: %d %v", status, m)
	}
}

func login(t *testing.T, url, email, pw string) int {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"email": email, "password": pw})
	resp, err := http.Post(url+"/v1/auth/login", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestUsersThroughTheRunningServer(t *testing.T) {
	dir := t.TempDir()
	url := startServe(t, dir)
	if fi, err := os.Stat(filepath.Join(dir, adminSocket)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin socket: %v, mode %v", err, fi.Mode().Perm())
	}
	_, how := mustCLI(t, "hunter2hunter2\n", "users", "add", "Ann@Example.org", "--password-stdin", "--data", dir)
	if !strings.Contains(how, "using the running server") {
		t.Fatalf("the mode was not said: %q", how)
	}
	if got := login(t, url, "ann@example.org", "hunter2hunter2"); got != 200 {
		t.Fatalf("login of an added user: %d", got)
	}
	users := usersJSON(t, dir)
	if len(users) != 1 || users[0].Email != "ann@example.org" || users[0].LiveSessions != 1 || users[0].Disabled {
		t.Fatalf("users: %+v", users)
	}
	out, _ := mustCLI(t, "", "users", "disable", "ann@example.org", "--data", dir)
	if !strings.Contains(out, "1 session closed") {
		t.Fatalf("disable: %q", out)
	}
	if got := login(t, url, "ann@example.org", "hunter2hunter2"); got != 423 {
		t.Fatalf("login of a disabled user: got %d, want 423", got)
	}
	if users := usersJSON(t, dir); !users[0].Disabled || users[0].LiveSessions != 0 {
		t.Fatalf("after disable: %+v", users[0])
	}
	mustCLI(t, "", "users", "enable", "ann@example.org", "--data", dir)
	api := apiClient{t, url}
	access := api.signIn("ann@example.org", "hunter2hunter2")
	if u := usersJSON(t, dir)[0]; u.SecondFactor || u.Albums != 0 || u.BlobsHeld != 0 {
		t.Fatalf("row: %+v", u)
	}
	api.enrollTOTP(access)
	if !usersJSON(t, dir)[0].SecondFactor {
		t.Fatal("the confirmed second factor is not listed")
	}
	if got := login(t, url, "ann@example.org", "hunter2hunter2"); got != 202 {
		t.Fatalf("login with a second factor: got %d, want 202 (a code is asked)", got)
	}
	out, _ = mustCLI(t, "", "users", "reset-2fa", "ann@example.org", "--data", dir)
	if !strings.Contains(out, "; 1 session closed") {
		t.Fatalf("reset-2fa: %q", out)
	}
	if usersJSON(t, dir)[0].SecondFactor {
		t.Fatal("reset-2fa left the second factor on")
	}
	if status, _ := api.do("GET", "/v1/auth/profile", access, "", nil); status != 401 {
		t.Fatalf("a session survived reset-2fa: profile answered %d", status)
	}
	if got := login(t, url, "ann@example.org", "hunter2hunter2"); got != 200 {
		t.Fatalf("login after reset-2fa: got %d, want 200 (password alone)", got)
	}
	mustCLI(t, "", "users", "set-quota", "ann@example.org", "50GiB", "--data", dir)
	if got := usersJSON(t, dir)[0].QuotaBytes; got != 50<<30 {
		t.Fatalf("quota: %d", got)
	}
	table, _ := mustCLI(t, "", "users", "list", "--data", dir)
	if !strings.Contains(table, "EMAIL") || !strings.Contains(table, "ann@example.org") || !strings.Contains(table, "50 GiB") || !strings.Contains(table, "0 B") {
		t.Fatalf("table without human units: %q", table)
	}
	// The second factor is gone: a second reset says so and changes nothing,
	// the session signed in above included.
	live := usersJSON(t, dir)[0].LiveSessions
	out, _ = mustCLI(t, "", "users", "reset-2fa", "ann@example.org", "--data", dir)
	if !strings.Contains(out, "ann@example.org") || !strings.Contains(out, "has no second factor; nothing changed") {
		t.Fatalf("reset-2fa without a second factor: %q", out)
	}
	if got := usersJSON(t, dir)[0].LiveSessions; live == 0 || got != live {
		t.Fatalf("reset-2fa without a second factor closed sessions: %d before, %d after", live, got)
	}
	if _, _, err := runCLI(t, "x\n", "users", "add", "bob@example.org", "--password-stdin", "--data", dir); err == nil {
		t.Fatal("a short password was accepted")
	}
	if _, _, err := runCLI(t, "", "users", "disable", "nobody@example.org", "--data", dir); err == nil {
		t.Fatal("disabling an unknown account succeeded")
	}
}

func TestUsersDirectlyOnTheStore(t *testing.T) {
	dir := t.TempDir()
	_, how, err := runCLI(t, "longenough1\n", "users", "add", "cy@example.org", "--password-stdin", "--data", dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(how, "working on "+dir+" directly") {
		t.Fatalf("the mode was not said: %q", how)
	}
	mustCLI(t, "", "users", "disable", "cy@example.org", "--data", dir)
	users := usersJSON(t, dir)
	if len(users) != 1 || !users[0].Disabled {
		t.Fatalf("users: %+v", users)
	}
	mustCLI(t, "", "users", "enable", "cy@example.org", "--data", dir)
	mustCLI(t, "", "users", "set-quota", "cy@example.org", "1GiB", "--data", dir)
	// A second factor is enrolled through the server, which then stops.
	url, stop := runServe(t, dir)
	api := apiClient{t, url}
	access := api.signIn("cy@example.org", "longenough1")
	api.enrollTOTP(access)
	if got := login(t, url, "cy@example.org", "longenough1"); got != 202 {
		t.Fatalf("login with a second factor: got %d, want 202 (a code is asked)", got)
	}
	stop()
	if !usersJSON(t, dir)[0].SecondFactor {
		t.Fatal("the confirmed second factor is not listed")
	}
	out, how := mustCLI(t, "", "users", "reset-2fa", "cy@example.org", "--data", dir)
	if !strings.Contains(how, "directly") || !strings.Contains(out, "second factor removed for cy@example.org") || !strings.Contains(out, "; 1 session closed") {
		t.Fatalf("reset-2fa: %q %q", how, out)
	}
	if u := usersJSON(t, dir)[0]; u.Disabled || u.QuotaBytes != 1<<30 || u.SecondFactor {
		t.Fatalf("after enable, set-quota and reset-2fa: %+v", u)
	}
	if _, _, err := runCLI(t, "longenough1\n", "users", "add", "CY@example.org", "--password-stdin", "--data", dir); err == nil {
		t.Fatal("a duplicate address was accepted")
	}
	api.url = startServe(t, dir)
	if status, _ := api.do("GET", "/v1/auth/profile", access, "", nil); status != 401 {
		t.Fatalf("a session survived reset-2fa: profile answered %d", status)
	}
	if got := login(t, api.url, "cy@example.org", "longenough1"); got != 200 {
		t.Fatalf("login after reset-2fa: got %d, want 200 (password alone)", got)
	}
}

// An admin command on a store that another process holds, with no server
// answering on the socket, gives up after the lock timeout and says why; it
// never hangs.
func TestAdminCommandOnAHeldStoreDoesNotHang(t *testing.T) {
	dir := t.TempDir()
	held, err := kvtest.Open(filepath.Join(dir, dbFile), kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	start := time.Now()
	_, _, err = runCLI(t, "", "users", "list", "--data", dir)
	if err == nil || !strings.Contains(err.Error(), "held by another process") {
		t.Fatalf("got %v, want a refusal naming the held store", err)
	}
	if waited := time.Since(start); waited > adminOpenTimeout+5*time.Second {
		t.Fatalf("gave up after %s", waited)
	}
}

// An admin command whose data directory has a socket that accepts
// connections but never answers (a server stopped with SIGSTOP, whose
// socket the kernel still accepts on) fails within the answer timeout and
// says why, instead of hanging or opening the store under the server.
func TestAdminCommandOnASilentSocketDoesNotHang(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(dir, adminSocket))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	commands := [][]string{
		{"users", "list"}, {"users", "disable", "a@example.org"}, {"check"}, {"gc", "--dry-run"},
		{"backup", filepath.Join(t.TempDir(), "backup")},
	}
	// All at once: each waits for the answer timeout.
	type result struct {
		args []string
		err  error
	}
	done := make(chan result, len(commands))
	for _, args := range commands {
		go func() {
			_, _, err := runCLI(t, "", append(args, "--data", dir)...)
			done <- result{args, err}
		}()
	}
	deadline := time.After(adminAnswerTimeout + 3*time.Second)
	for range commands {
		select {
		case r := <-done:
			if r.err == nil || !strings.Contains(r.err.Error(), "did not answer") {
				t.Errorf("sealbox %s: got %v, want a refusal saying the server does not answer", strings.Join(r.args, " "), r.err)
			}
		case <-deadline:
			t.Fatal("an admin command hangs on a socket that does not answer")
		}
	}
	if _, err := os.Stat(filepath.Join(dir, dbFile)); err == nil {
		t.Fatal("the store was opened directly although a process listens on the socket")
	}
}

// TestDefaultQuotaOnTheSocket: an account `users add` creates on a running
// server gets its --default-quota, and the listing shows usage against it.
func TestDefaultQuotaOnTheSocket(t *testing.T) {
	dir := t.TempDir()
	url := startServe(t, dir, func(c *server.Config) { c.DefaultQuota = 1000 })
	mustCLI(t, "longenough1\n", "users", "add", "dee@example.org", "--password-stdin", "--data", dir)
	if u := usersJSON(t, dir)[0]; u.QuotaBytes != 1000 {
		t.Fatalf("quota of an added account: got %d, want 1000", u.QuotaBytes)
	}
	api := apiClient{t, url}
	access := api.signIn("dee@example.org", "longenough1")
	servertest.Client{BaseURL: url}.Upload(t, access, bytes.Repeat([]byte{1}, 250))
	table, _ := mustCLI(t, "", "users", "list", "--data", dir)
	if lines := strings.Split(table, "\n"); len(lines) < 2 || !strings.HasSuffix(strings.Join(strings.Fields(lines[0]), " "), "STORED QUOTA USED") ||
		!strings.HasSuffix(strings.Join(strings.Fields(lines[1]), " "), "250 B 1000 B 25%") {
		t.Fatalf("users list shows no usage against the quota:\n%s", table)
	}
}

func TestUsedText(t *testing.T) {
	for _, tc := range []struct {
		held, quota int64
		want        string
	}{{0, 0, "-"}, {5 << 30, 0, "-"}, {0, 100, "0%"}, {999, 1000, "99%"}, {1000, 1000, "100%"}, {1500, 1000, "150%"}} {
		if got := usedText(tc.held, tc.quota); got != tc.want {
			t.Errorf("usedText(%d, %d): got %q, want %q", tc.held, tc.quota, got, tc.want)
		}
	}
}

// TestSetPassword: `users set-password` through the running server gives a
// locked-out user a new password: the old one and every session stop, the
// lockout is cleared, and the server's log has an audit line without the
// password or the email.
func TestSetPassword(t *testing.T) {
	var log syncBuffer
	dir := t.TempDir()
	url := startServe(t, dir, func(c *server.Config) { c.Log = zerolog.New(&log); c.LockoutFailures = 2 })
	mustCLI(t, "old password 1\n", "users", "add", "eve@example.org", "--password-stdin", "--data", dir)
	api := apiClient{t, url}
	access := api.signIn("eve@example.org", "old password 1")
	for range 2 {
		if got := login(t, url, "eve@example.org", "a wrong guess"); got != 401 {
			t.Fatalf("a wrong password: %d", got)
		}
	}
	if got := login(t, url, "eve@example.org", "old password 1"); got != 423 {
		t.Fatalf("after two failures: %d, want 423 (locked)", got)
	}
	const secret = "the new password 2"
	out, _ := mustCLI(t, secret+"\n", "users", "set-password", "eve@example.org", "--password-stdin", "--raw", "--data", dir)
	if !strings.Contains(out, "password set for eve@example.org") || !strings.Contains(out, "; 1 session closed") || !strings.Contains(out, "recovery key") {
		t.Fatalf("users set-password: %q", out)
	}
	if status, _ := api.do("GET", "/v1/auth/profile", access, "", nil); status != 401 {
		t.Fatalf("a session survived the reset: profile answered %d", status)
	}
	if got := login(t, url, "eve@example.org", "old password 1"); got != 401 {
		t.Fatalf("the old password after the reset: %d, want 401", got)
	}
	if got := login(t, url, "eve@example.org", secret); got != 200 {
		t.Fatalf("the new password after the reset: %d, want 200 (lockout cleared)", got)
	}
	if !strings.Contains(log.String(), `"command":"users set-password"`) || strings.Contains(log.String(), secret) || strings.Contains(log.String(), "eve@example.org") {
		t.Fatalf("the audit line of set-password:\n%s", log.String())
	}
	// Without --raw the server is given the password's login secret, as
	// sealbox client sends it (cli/sealed/FORMAT.md §5.3).
	const forClient = "a password for the client 3"
	mustCLI(t, forClient+"\n", "users", "set-password", "eve@example.org", "--password-stdin", "--data", dir)
	if got := login(t, url, "eve@example.org", forClient); got != 401 {
		t.Fatalf("the password itself after a reset for the client: %d, want 401", got)
	}
	if got := login(t, url, "eve@example.org", sealed.LoginSecret("eve@example.org", forClient)); got != 200 {
		t.Fatalf("the login secret after a reset for the client: %d, want 200", got)
	}
	if _, _, err := runCLI(t, "short\n", "users", "set-password", "eve@example.org", "--password-stdin", "--data", dir); err == nil {
		t.Fatal("a short password was accepted")
	}
	if _, _, err := runCLI(t, secret+"\n", "users", "set-password", "nobody@example.org", "--password-stdin", "--data", dir); err == nil {
		t.Fatal("an unknown account was accepted")
	}
	if _, _, err := runCLI(t, "", "users", "set-password", "eve@example.org", "--password", secret, "--data", dir); err == nil {
		t.Fatal("a password flag was accepted")
	}
}

// TestDeleteUserThenGC: `users delete` asks for the email again (or takes
// --yes), deletes the account, and the gc that follows frees exactly the
// blobs nobody else holds: of two accounts sharing a blob, the deleted
// one's own blob goes, the shared one and the other account's stay.
func TestDeleteUserThenGC(t *testing.T) {
	dir := t.TempDir()
	url := startServe(t, dir, openRegistration)
	api := apiClient{t, url}
	ann, annUp := api.account("ann@example.org")
	bob, bobUp := api.account("bob@example.org")
	shared, annOwn, bobOwn := blob(1), blob(2), blob(3)
	for _, p := range []struct {
		token, upload string
		data          []byte
	}{{ann, annUp, shared}, {ann, annUp, annOwn}, {bob, bobUp, shared}, {bob, bobUp, bobOwn}} {
		if status := api.put(p.token, p.upload, p.data); status != 201 {
			t.Fatalf("upload: %d", status)
		}
	}
	long := time.Now().Add(-48 * time.Hour)
	for _, b := range [][]byte{shared, annOwn, bobOwn} {
		os.Chtimes(blobPath(dir, hashHex(b)), long, long)
	}
	if _, _, err := runCLI(t, "bob@example.org\n", "users", "delete", "ann@example.org", "--data", dir); err == nil || !strings.Contains(err.Error(), "nothing deleted") {
		t.Fatalf("delete confirmed with another email: %v", err)
	}
	if len(usersJSON(t, dir)) != 2 {
		t.Fatal("an unconfirmed delete deleted")
	}
	out, errOut := mustCLI(t, "Ann@example.org\n", "users", "delete", "ann@example.org", "--data", dir)
	if !strings.Contains(errOut, "Type the email again") || !strings.Contains(out, "deleted ann@example.org") || !strings.Contains(out, "1 blobs are held by nobody now") {
		t.Fatalf("users delete: %q %q", out, errOut)
	}
	if users := usersJSON(t, dir); len(users) != 1 || users[0].Email != "bob@example.org" {
		t.Fatalf("users after the deletion: %+v", users)
	}
	if status, _ := api.do("GET", "/v1/auth/profile", ann, "", nil); status != 401 {
		t.Fatalf("the deleted account's token: %d", status)
	}
	gc, _ := mustCLI(t, "", "gc", "--data", dir)
	if !strings.Contains(gc, "removed 1 unreferenced blobs") {
		t.Fatalf("gc: %q", gc)
	}
	for b, want := range map[string]bool{hashHex(shared): true, hashHex(annOwn): false, hashHex(bobOwn): true} {
		if _, err := os.Stat(blobPath(dir, b)); (err == nil) != want {
			t.Errorf("blob %s after gc: present %v, want %v", b[:8], err == nil, want)
		}
	}
	if status, _ := api.do("GET", "/v1/blobs/"+hashHex(shared), bob, "", nil); status != 200 {
		t.Fatalf("bob's shared blob after gc: %d", status)
	}
	if _, _, err := runCLI(t, "", "users", "delete", "ann@example.org", "--yes", "--data", dir); err == nil {
		t.Fatal("deleting a deleted account succeeded")
	}
	mustCLI(t, "", "users", "delete", "bob@example.org", "--yes", "--data", dir)
	if users := usersJSON(t, dir); len(users) != 0 {
		t.Fatalf("users after --yes: %+v", users)
	}
}
