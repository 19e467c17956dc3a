package cli

import (
	"context"
	"errors"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sealbox/kv"
	"sealbox/kv/pgtest"
	"sealbox/server"
)

// TestOnlyEnginesGoNamesEngines: engines.go, the composition root, is the
// one file of cli and its packages that imports an engine; everything else
// sees a *kv.Store, a blobs.Engine and admin.StoreFiles. Tests may open
// engines of their own.
func TestOnlyEnginesGoNamesEngines(t *testing.T) {
	engines := map[string]bool{`"sealbox/kv/bolt"`: true, `"sealbox/kv/postgres"`: true, `"sealbox/blobs/s3"`: true}
	files, importers := 0, 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			if !engines[imp.Path.Value] {
				continue
			}
			if path != "engines.go" {
				t.Errorf("%s imports %s: only engines.go names an engine", path, imp.Path.Value)
			}
			importers++
		}
		return nil
	})
	// engines.go's own imports prove the walk saw what it looks for.
	if err != nil || files < 50 || importers < len(engines) {
		t.Fatalf("walked %d files of cli, %d engine imports: %v", files, importers, err)
	}
}

// TestLocationRefusesOtherEngines: a store or blobs URL of an engine
// sealbox does not have is refused before anything starts, naming the flag
// or the variable it came from, and never echoing a password.
func TestLocationRefusesOtherEngines(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		mention string
	}{
		{"mysql store", []string{"--store", "mysql://u:hunter2@db/sealbox"}, nil, "--store must be empty"},
		{"store from the environment", nil, map[string]string{"SEALBOX_STORE": "sqlite:///x.db"}, "SEALBOX_STORE must be empty"},
		{"file blobs", []string{"--blobs", "file:///srv/blobs"}, nil, "--blobs must be empty"},
		{"blobs from the environment", nil, map[string]string{"SEALBOX_BLOBS": "gs://bucket"}, "SEALBOX_BLOBS must be empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			dir := t.TempDir()
			for _, cmd := range [][]string{{"serve", "--listen", "127.0.0.1:0"}, {"users", "list"}} {
				args := append(append(cmd, "--data", dir), tc.args...)
				_, _, err := runCLI(t, "", args...)
				if err == nil || !strings.Contains(err.Error(), tc.mention) {
					t.Fatalf("sealbox %s: %v, want an error saying %q", strings.Join(args, " "), err, tc.mention)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Fatalf("the message shows the password: %v", err)
				}
			}
		})
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://sealbox:hunter2@db:5432/sealbox?sslmode=require": "postgres://sealbox:xxxxx@db:5432/sealbox?sslmode=require",
		"postgres://db/sealbox?password=hunter2&sslmode=disable":     "postgres://db/sealbox?password=xxxxx&sslmode=disable",
		"postgres://sealbox@db/sealbox":                              "postgres://sealbox@db/sealbox",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestServeOnPostgres: serve runs on a PostgreSQL store; the admin
// commands reach the same store with --store and no server socket; its
// backup restores into a data directory of its own; a node
// started with a data directory of its own (other keys) on that store is
// refused before it serves, and its refusal changes nothing.
func TestServeOnPostgres(t *testing.T) {
	if !pgtest.Enabled() {
		t.Skip("SEALBOX_TEST_PG is not set")
	}
	url := pgtest.URL(t)
	first := Location{Data: t.TempDir(), Store: url}
	base, stop := runServeAt(t, first, openRegistration)
	api := apiClient{t, base}
	token, upload := api.account("pg@example.org")
	if status := api.put(token, upload, blob(3)); status != 201 {
		t.Fatalf("put: %d", status)
	}
	stop()
	if _, err := os.Stat(filepath.Join(first.Data, dbFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a node on PostgreSQL made a bbolt file: %v", err)
	}
	out, how := mustCLI(t, "", "users", "list", "--data", t.TempDir(), "--store", url)
	if !strings.Contains(out, "pg@example.org") || !strings.Contains(how, "working on postgres://") {
		t.Fatalf("users list on the PostgreSQL store:\n%s\n%s", out, how)
	}

	// A backup of a PostgreSQL store is a data directory like any other:
	// restore checks it and the restored bbolt store holds the account.
	backup, restored := filepath.Join(t.TempDir(), "backup"), filepath.Join(t.TempDir(), "restored")
	mustCLI(t, "", "backup", backup, "--data", first.Data, "--store", url)
	mustCLI(t, "", "restore", backup, "--data", restored)
	if users := usersJSON(t, restored); len(users) != 1 || users[0].Email != "pg@example.org" || users[0].BlobsHeld != 1 {
		t.Fatalf("users of the restored backup: %+v", users)
	}

	other := &Serve{Location: Location{Data: t.TempDir(), Store: url}, Listen: "127.0.0.1:0", Config: server.DefaultConfig()}
	err := other.Run(context.Background())
	if !errors.Is(err, kv.ErrKeysDiffer) || !strings.Contains(err.Error(), "copy server.key") {
		t.Fatalf("a node with keys of its own: %v, want ErrKeysDiffer telling what to copy", err)
	}
	base, stop = runServeAt(t, first)
	defer stop()
	apiClient{t, base}.signIn("pg@example.org", "password-pg@example.org")
}
