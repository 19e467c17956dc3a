package postgres_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"sealbox/kv/postgres"
)

// passwordCatcher is a PostgreSQL server that asks every client for its
// password in clear and reports it, then refuses the login.
func passwordCatcher(t *testing.T) (addr string, passwords <-chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got := make(chan string, 16)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				conn.SetDeadline(time.Now().Add(10 * time.Second))
				be := pgproto3.NewBackend(conn, conn)
				msg, err := be.ReceiveStartupMessage()
				if err != nil {
					return
				}
				if _, ok := msg.(*pgproto3.SSLRequest); ok {
					conn.Write([]byte("N"))
					if _, err := be.ReceiveStartupMessage(); err != nil {
						return
					}
				}
				be.Send(&pgproto3.AuthenticationCleartextPassword{})
				if err := be.Flush(); err != nil {
					return
				}
				be.SetAuthType(pgproto3.AuthTypeCleartextPassword)
				reply, err := be.Receive()
				if err != nil {
					return
				}
				if p, ok := reply.(*pgproto3.PasswordMessage); ok {
					got <- p.Password
				}
				be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "28P01", Message: "password authentication failed"})
				be.Flush()
			}()
		}
	}()
	return ln.Addr().String(), got
}

// TestPostgresPasswordFromTheEnvironment: a --store URL without a password
// takes it from PGPASSWORD, or from the PGPASSFILE line that matches it, as
// libpq does, so the password never has to be on the command line (where
// ps shows it).
func TestPostgresPasswordFromTheEnvironment(t *testing.T) {
	addr, passwords := passwordCatcher(t)
	host, port, _ := net.SplitHostPort(addr)
	url := "postgres://sealbox@" + addr + "/sealbox?sslmode=disable&connect_timeout=5"
	try := func(want string) {
		t.Helper()
		if _, err := postgres.Open(context.Background(), url); err == nil {
			t.Fatal("the catcher refuses every login, yet the engine opened")
		}
		select {
		case got := <-passwords:
			if got != want {
				t.Fatalf("the server was given password %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the client gave no password")
		}
	}
	t.Setenv("PGPASSWORD", "from-the-variable")
	try("from-the-variable")

	os.Unsetenv("PGPASSWORD")
	passfile := filepath.Join(t.TempDir(), "pgpass")
	line := host + ":" + port + ":sealbox:sealbox:from-the-file\n"
	if err := os.WriteFile(passfile, []byte("otherhost:5432:*:*:wrong\n"+line), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PGPASSFILE", passfile)
	try("from-the-file")
}

// TestPostgresLoginFailureNamesPGPASSWORD: a login the server refuses for
// its password (28P01) says where the password goes.
func TestPostgresLoginFailureNamesPGPASSWORD(t *testing.T) {
	addr, _ := passwordCatcher(t)
	t.Setenv("PGPASSWORD", "")
	_, err := postgres.Open(context.Background(), "postgres://sealbox@"+addr+"/sealbox?sslmode=disable&connect_timeout=5")
	if err == nil || !strings.Contains(err.Error(), "(SQLSTATE 28P01): give the role's password in PGPASSWORD, or in the file PGPASSFILE names (~/.pgpass by default), not in the URL") {
		t.Fatalf("a refused login: %v", err)
	}
}
