package postgres_test

import (
	"context"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"sealbox/kv/pgtest"
	"sealbox/kv/postgres"
)

// readmeSQL is the README's ```sql block that makes sealbox's role and
// database, and readmeLocalURL the URL it gives for a local server.
var (
	readmeSQL      = regexp.MustCompile("(?s)```sql\n(.*?)```")
	readmeLocalURL = regexp.MustCompile(`'(postgres://sealbox@127\.0\.0\.1:5432/sealbox\?sslmode=disable)'`)
)

// TestREADMEPostgresSetup: the README's SQL, run as the superuser, makes
// a role and a database that the README's local URL (its host and port
// those of the test server) opens as a store whose tables sealbox can
// create, so an operator following it needs no guessing.
func TestREADMEPostgresSetup(t *testing.T) {
	if !pgtest.Enabled() {
		t.Skip("SEALBOX_TEST_PG is not set")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	block, local := readmeSQL.FindSubmatch(readme), readmeLocalURL.FindSubmatch(readme)
	if block == nil || local == nil {
		t.Fatalf("the README has no ```sql block (%v) or no local URL (%v)", block != nil, local != nil)
	}
	super, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	super.RawQuery = ""
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, super.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, stmt := range strings.Split(string(block[1]), ";") {
		if stmt = strings.TrimSpace(stmt); stmt != "" {
			if _, err := conn.Exec(ctx, stmt); err != nil {
				t.Fatalf("the README's %q: %v", stmt, err)
			}
		}
	}
	t.Cleanup(func() {
		conn.Exec(ctx, "DROP DATABASE sealbox WITH (FORCE)")
		conn.Exec(ctx, "DROP ROLE sealbox")
	})
	u, err := url.Parse(string(local[1]))
	if err != nil {
		t.Fatal(err)
	}
	u.Host = super.Host
	t.Setenv("PGPASSWORD", "a long random password")
	e, err := postgres.Open(ctx, u.String())
	if err != nil {
		t.Fatalf("open %s: %v", u.Redacted(), err)
	}
	defer e.Close()
	if err := e.CreateBuckets([][]byte{[]byte("meta")}); err != nil {
		t.Fatalf("the README's role cannot create sealbox's tables: %v", err)
	}
}
