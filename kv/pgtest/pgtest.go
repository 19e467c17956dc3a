// Package pgtest gives tests a real PostgreSQL: with SEALBOX_TEST_PG set to
// a postgres:// URL, that server; set to 1, a private cluster this test
// process starts from Debian's postgresql package (initdb and pg_ctl, as the
// postgres user when run as root, on 127.0.0.1, fsync on) and stops in
// Stop. Every caller of URL gets an empty schema of its own. Unset, the
// suites run on bbolt and URL answers "".
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Enabled reports whether the suites are asked to run on PostgreSQL.
func Enabled() bool { return os.Getenv("SEALBOX_TEST_PG") != "" }

var (
	once    sync.Once
	server  string // the server's URL
	cluster string // the data directory of a cluster this process started
	bin     string
	failure error
)

// URL returns the URL of a fresh, empty schema on the test server, or ""
// when SEALBOX_TEST_PG is unset. A server that cannot be reached or started
// fails the test: it was asked for.
func URL(tb testing.TB) string {
	tb.Helper()
	if !Enabled() {
		return ""
	}
	once.Do(func() { server, failure = start() })
	if failure != nil {
		tb.Fatalf("SEALBOX_TEST_PG is set but PostgreSQL is not available: %v", failure)
	}
	var b [8]byte
	rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		tb.Fatal(err)
	}
	u, err := url.Parse(server)
	if err != nil {
		tb.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// Dump returns every key and value of every table in the schema of a URL
// that URL returned, concatenated: what a secret must never be found in.
// It returns nil for anything else (a bbolt file's path).
func Dump(tb testing.TB, schemaURL string) []byte {
	tb.Helper()
	if !strings.HasPrefix(schemaURL, "postgres://") {
		return nil
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, schemaURL)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")
	if err != nil {
		tb.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		tb.Fatal(err)
	}
	out := []byte{}
	for _, t := range tables {
		rows, err := conn.Query(ctx, "SELECT k || v FROM "+pgx.Identifier{t}.Sanitize())
		if err != nil {
			tb.Fatal(err)
		}
		pairs, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
		if err != nil {
			tb.Fatal(err)
		}
		for _, p := range pairs {
			out = append(append(out, p...), 0)
		}
	}
	return out
}

func start() (string, error) {
	if v := os.Getenv("SEALBOX_TEST_PG"); v != "1" {
		return v, nil
	}
	var err error
	if bin, err = binDir(); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "sealbox-pg-*")
	if err != nil {
		return "", err
	}
	if err := giveToPostgres(dir); err != nil {
		return "", err
	}
	cluster = dir
	data := filepath.Join(dir, "data")
	if out, err := asPostgres("initdb", "-D", data, "-U", "postgres", "--auth=trust", "--no-sync").CombinedOutput(); err != nil {
		return "", fmt.Errorf("initdb: %v: %s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return "", err
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=on", port, dir)
	if out, err := asPostgres("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "start").CombinedOutput(); err != nil {
		return "", fmt.Errorf("pg_ctl start: %v: %s", err, out)
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port), nil
}

// Stop stops the cluster this process started, if any, and removes it.
// A TestMain calls it after the tests.
func Stop() {
	if cluster == "" {
		return
	}
	asPostgres("pg_ctl", "-D", filepath.Join(cluster, "data"), "-m", "immediate", "stop").Run()
	os.RemoveAll(cluster)
}

// binDir finds the server programs: on PATH, or in Debian's versioned
// directory.
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		return "", fmt.Errorf("no initdb on PATH or in /usr/lib/postgresql (apt-get install postgresql)")
	}
	return filepath.Dir(matches[len(matches)-1]), nil
}

// asPostgres runs a server program, as the postgres user when this process
// is root (PostgreSQL refuses to run as root).
func asPostgres(name string, args ...string) *exec.Cmd {
	path := filepath.Join(bin, name)
	if os.Geteuid() != 0 {
		return exec.Command(path, args...)
	}
	return exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
}

func giveToPostgres(dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("running as root needs the postgres user (apt-get install postgresql): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(dir, uid, gid)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
