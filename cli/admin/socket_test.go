package admin_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
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
