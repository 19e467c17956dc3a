package admin_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sealbox/cli/admin"
)

// answerTimeout is the bound the tests give Dial: short, so a test of a
// server that never answers ends quickly.
const answerTimeout = 200 * time.Millisecond

// listen opens a unix socket in a fresh directory.
func listen(t *testing.T) (string, *net.UnixListener) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "admin.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return path, ln
}

// serve answers on a new socket with h and returns the socket's path.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	path, ln := listen(t)
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return path
}

// TestDialTellsNoServerFromASilentOne: only a socket nobody listens on lets
// the CLI open the store directly; a process that accepts connections but
// does not answer (a stopped server) fails Dial within its bound.
func TestDialTellsNoServerFromASilentOne(t *testing.T) {
	cases := []struct {
		name     string
		socket   func(t *testing.T) string
		noServer bool
	}{
		{"no socket file", func(t *testing.T) string { return filepath.Join(t.TempDir(), "admin.sock") }, true},
		{"stale socket file", func(t *testing.T) string {
			path, ln := listen(t)
			ln.SetUnlinkOnClose(false)
			ln.Close()
			return path
		}, true},
		{"accepts and never answers", func(t *testing.T) string {
			path, ln := listen(t)
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
			return path
		}, false},
		{"listens and never accepts", func(t *testing.T) string {
			path, _ := listen(t)
			return path
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.socket(t)
			start := time.Now()
			_, err := admin.Dial(path, answerTimeout)
			if err == nil {
				t.Fatal("Dial succeeded")
			}
			if got := errors.Is(err, admin.ErrNoServer); got != tc.noServer {
				t.Fatalf("ErrNoServer: got %v, want %v (%v)", got, tc.noServer, err)
			}
			if !tc.noServer && !strings.Contains(err.Error(), "did not answer") {
				t.Fatalf("the error does not say the server did not answer: %v", err)
			}
			if waited := time.Since(start); waited > answerTimeout+2*time.Second {
				t.Fatalf("Dial gave up after %s", waited)
			}
		})
	}
}

// TestCallToAServerThatStopsAnswering: a server that answered the ping and
// then stops answering fails the call once the headers are late.
func TestCallToAServerThatStopsAnswering(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ping", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("/", func(http.ResponseWriter, *http.Request) { <-release })
	c, err := admin.Dial(serve(t, mux), answerTimeout)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := c.Users(context.Background()); err == nil {
		t.Fatal("a call the server never answered succeeded")
	}
	if waited := time.Since(start); waited > answerTimeout+2*time.Second {
		t.Fatalf("the call gave up after %s", waited)
	}
}

// slowOps takes several answer timeouts over a check and over a backup's
// snapshot (before its first progress line): the bound on the wait for an
// answer's headers must not cut them. Its other operations are not called.
type slowOps struct {
	admin.Admin
}

const slowOp = 3 * answerTimeout

func (slowOps) Check(ctx context.Context, deep bool) (admin.CheckReport, error) {
	time.Sleep(slowOp)
	return admin.CheckReport{Blobs: 7, Deep: deep}, nil
}

func (slowOps) Backup(ctx context.Context, dest string, _ admin.BackupOptions, progress func(admin.Progress)) (admin.BackupReport, error) {
	time.Sleep(slowOp)
	progress(admin.Progress{BlobsDone: 1, BlobsTotal: 1})
	return admin.BackupReport{Dest: dest, BlobsCopied: 1}, nil
}

func TestSlowOperationsAreNotCut(t *testing.T) {
	c, err := admin.Dial(serve(t, admin.Handler(slowOps{})), answerTimeout)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if rep, err := c.Check(ctx, true); err != nil || rep.Blobs != 7 || !rep.Deep {
		t.Fatalf("check: %+v, %v", rep, err)
	}
	var progress []admin.Progress
	rep, err := c.Backup(ctx, "/backup", admin.BackupOptions{}, func(p admin.Progress) { progress = append(progress, p) })
	if err != nil || rep.Dest != "/backup" || rep.BlobsCopied != 1 || len(progress) != 1 {
		t.Fatalf("backup: %+v, %v, progress %v", rep, err, progress)
	}
}

// usersOps answers Users with one user; its other operations are not
// called.
type usersOps struct {
	admin.Admin
}

func (usersOps) Users(context.Context) ([]admin.User, error) {
	return []admin.User{{Email: "a@example.org"}}, nil
}

// serveListener serves the admin handler on ln until the test ends.
func serveListener(t *testing.T, ln net.Listener) {
	t.Helper()
	srv := &http.Server{Handler: admin.Handler(usersOps{})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

// TestAdminSocketChecksItsPeer: the server hands a connection on only when
// its peer's uid (as the kernel recorded it) is allowed: by default this
// process's user and root; any other is closed at once and reported. Tests
// run as one user, so the refused path is shown by allowing everyone but
// it.
func TestAdminSocketChecksItsPeer(t *testing.T) {
	me := uint32(os.Geteuid())
	cases := []struct {
		name    string
		allowed func(uint32) bool
		refused bool
	}{
		{"the server's user, by default", nil, false},
		{"a user other than the peer's", func(uid uint32) bool { return uid != me }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "admin.sock")
			var mu sync.Mutex
			var refusedUIDs []uint32
			ln, err := admin.Listen(path, admin.ListenOptions{Allowed: tc.allowed, Refused: func(uid uint32, err error) {
				if err != nil {
					t.Errorf("the peer's uid was not read: %v", err)
				}
				mu.Lock()
				refusedUIDs = append(refusedUIDs, uid)
				mu.Unlock()
			}})
			if err != nil {
				t.Fatal(err)
			}
			serveListener(t, ln)
			c, err := admin.Dial(path, answerTimeout)
			if !tc.refused {
				if err != nil {
					t.Fatal(err)
				}
				if users, err := c.Users(context.Background()); err != nil || len(users) != 1 {
					t.Fatalf("users: %v, %v", users, err)
				}
				if len(refusedUIDs) > 0 {
					t.Fatalf("refused %v", refusedUIDs)
				}
				return
			}
			if err == nil {
				t.Fatal("a peer whose uid is not allowed was served")
			}
			mu.Lock()
			defer mu.Unlock()
			if len(refusedUIDs) != 1 || refusedUIDs[0] != me {
				t.Fatalf("refusals reported: %v, want one of uid %d", refusedUIDs, me)
			}
		})
	}
}

// TestAdminSocketIsPrivateUnderAnyUmask: with umask 000 and a data
// directory anyone can read, the socket is mode 0600 from the moment it
// has its name (it is made private before it is renamed there), no other
// file is left beside it, and a stale socket is replaced. A watcher polls
// the name while the socket is made again and again: it must never see
// another mode.
func TestAdminSocketIsPrivateUnderAnyUmask(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "admin.sock")
	stop := make(chan struct{})
	seen := make(chan os.FileMode, 1)
	go func() {
		defer close(seen)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if fi, err := os.Lstat(path); err == nil && fi.Mode().Perm() != 0o600 {
				seen <- fi.Mode()
				return
			}
		}
	}()
	for range 200 {
		os.Remove(path)
		ln, err := admin.Listen(path, admin.ListenOptions{})
		if err != nil {
			close(stop)
			t.Fatal(err)
		}
		ln.Close()
	}
	close(stop)
	if mode, ok := <-seen; ok {
		t.Fatalf("the socket had mode %s at its name", mode)
	}

	// A stale socket left by the loop above is replaced.
	ln, err := admin.Listen(path, admin.ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	serveListener(t, ln)
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the socket: %s, want a socket of mode 0600", fi.Mode())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("the data directory holds %d entries, want the socket alone", len(entries))
	}
	if _, err := admin.Dial(path, answerTimeout); err != nil {
		t.Fatal(err)
	}
}
