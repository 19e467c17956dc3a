package cli

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"sealbox/blobs"
	"sealbox/cli/admin"
	"sealbox/kv"
	"sealbox/server"
	"sealbox/server/password"
)

// adminSocket is the admin channel's file inside the data directory.
const adminSocket = "admin.sock"

// adminOpenTimeout bounds the wait for the store's file lock when no server
// listens on the socket, so an admin command never hangs.
const adminOpenTimeout = 2 * time.Second

// adminAnswerTimeout bounds the wait for a server listening on the socket to
// start answering, for the same reason: the kernel accepts connections on
// the socket of a stopped server.
const adminAnswerTimeout = 2 * time.Second

// access says what an admin command does to the data directory.
type access int

const (
	// readWrite commands may change the store; opened directly, a data
	// directory without one gets an empty store.
	readWrite access = iota
	// readOnly commands (check, users list, gc --dry-run, backup) open the
	// store read-only and create nothing: they refuse a directory that
	// holds no store, and leave a backup they check as it was.
	readOnly
	// removing commands (gc) are readWrite ones that delete blobs the store
	// does not record, so they also refuse a blob store not proven to be
	// the store's instance's (instanceRemove).
	removing
)

// connectAdmin reaches the instance's operations: through the running
// server's admin socket when one answers, else by opening the store
// directly as mode allows. A store in PostgreSQL is always opened directly:
// nodes share it without a file lock, so the command needs no server. It
// tells on w which way it went. The returned function releases what it
// opened.
func connectAdmin(ctx context.Context, loc Location, mode access, w io.Writer) (admin.Admin, func(), error) {
	if !loc.networked() {
		sock := filepath.Join(loc.Data, adminSocket)
		c, err := admin.Dial(sock, adminAnswerTimeout)
		if err == nil {
			fmt.Fprintf(w, "sealbox: using the running server (admin socket %s)\n", sock)
			return c, func() {}, nil
		}
		// A process that listens but does not answer is most likely a stopped
		// server, which still holds the store: opening it directly would wait
		// for the lock and then blame it, hiding what is wrong.
		if !errors.Is(err, admin.ErrNoServer) {
			return nil, nil, fmt.Errorf("%w; not opening the store directly while that process may hold it", err)
		}
	}
	if _, err := os.Stat(loc.Data); !loc.networked() && errors.Is(err, fs.ErrNotExist) {
		// Opening would fail with a bare "open …: no such file or
		// directory"; every admin command says it the one way instead.
		return nil, nil, noStore(loc)
	}
	storeOpts := kv.Options{
		ReadOnly: mode == readOnly, Version: server.Version,
		// Only serve migrates, after saying which migrations it runs.
		NoMigrate: true,
	}
	var store *kv.Store
	var err error
	release := func() { store.Close() }
	if !loc.networked() && admin.IsChunkedGeneration(loc.Data) {
		// A backup generation keeps its store in chunks: a command that
		// only reads reads them re-assembled (each re-hashed), and any
		// other is refused, never given a new empty store beside them.
		if mode != readOnly {
			return nil, nil, admin.RefuseChunkedGeneration(loc.Data)
		}
		store, release, err = admin.OpenChunkedSnapshot(loc.Data, storeOpts, storeFiles{})
	} else {
		store, err = loc.openStoreFor(ctx, forAdmin, storeOpts)
	}
	if errors.Is(err, kv.ErrLocked) {
		return nil, nil, fmt.Errorf("%s is held by another process, and no server answers on %s", loc.Data, filepath.Join(loc.Data, adminSocket))
	}
	if mode == readOnly && errors.Is(err, fs.ErrNotExist) {
		return nil, nil, noStore(loc)
	}
	if err != nil {
		return nil, nil, err
	}
	blobStore, err := loc.openBlobs(ctx, blobsOpen{readOnly: mode == readOnly})
	if err != nil {
		release()
		return nil, nil, err
	}
	need := instanceRead
	if mode == removing {
		need = instanceRemove
	}
	if _, err := bindInstance(loc, store, blobStore, need); err != nil {
		release()
		return nil, nil, fmt.Errorf("refusing: %w", err)
	}
	if loc.networked() {
		fmt.Fprintf(w, "sealbox: working on %s directly\n", loc.describeStore())
	} else {
		fmt.Fprintf(w, "sealbox: no server is running; working on %s directly\n", loc.Data)
	}
	return newOps(loc, store, blobStore, password.Default), release, nil
}

// noStore is the one refusal of every admin command given a data directory
// that holds no store.
func noStore(loc Location) error {
	return fmt.Errorf("%s holds no sealbox store (no %s): point at the instance's data directory with --data or SEALBOX_DATA (sealbox serve creates one on first start)", loc.Data, dbFile)
}

// newOps builds the operations over an open instance; new passwords are
// hashed with params.
func newOps(loc Location, store *kv.Store, blobStore blobs.Engine, params password.Params) *admin.Ops {
	return &admin.Ops{DataDir: loc.Data, StoreAt: loc.describeStore(), BlobsAt: loc.describeBlobs(), Store: store, Blobs: blobStore, Files: storeFiles{}, Hasher: password.NewHasher(params, rand.Reader, 0), Rand: rand.Reader}
}

// withAdmin runs fn with a connection to the instance cmd's --data,
// --store and --blobs name, each also read from its SEALBOX_* variable like
// serve's (cmd's other flags are its own and read nothing from the
// environment).
func withAdmin(cmd *cobra.Command, loc *Location, mode access, fn func(admin.Admin) error) error {
	ignored, err := bindLocationEnv(cmd.Flags())
	if err != nil {
		return err
	}
	if len(ignored) > 0 {
		fmt.Fprintln(cmd.ErrOrStderr(), "sealbox:", ignoredLocationEnv(ignored))
	}
	if passwordOnCommandLine(cmd.Flags()) {
		fmt.Fprintln(cmd.ErrOrStderr(), "sealbox: warning:", storePasswordAdvice)
	}
	if err := loc.validate(flagNamer(cmd.Flags())); err != nil {
		return err
	}
	if !loc.networked() {
		if _, err := os.Stat(filepath.Join(loc.Data, dbFile)); errors.Is(err, fs.ErrPermission) {
			return unreadableData(loc.Data, cmd.CommandPath(), err)
		}
	}
	a, release, err := connectAdmin(cmd.Context(), *loc, mode, cmd.ErrOrStderr())
	if err != nil && !loc.networked() && errors.Is(err, fs.ErrPermission) {
		return unreadableData(loc.Data, cmd.CommandPath(), err)
	}
	if err != nil {
		return err
	}
	defer release()
	return fn(a)
}

// unreadableData is the refusal of an admin command run by a user who may
// not enter the data directory, or open its store or its socket: a systemd
// install keeps them for the service's user, whose account the command must
// run under. Said any other way, the "permission denied" of the socket
// reads as a server holding the store.
func unreadableData(dir, command string, cause error) error {
	owner := "sealbox"
	if fi, err := os.Stat(dir); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			owner = "#" + strconv.FormatUint(uint64(st.Uid), 10)
			if u, err := user.LookupId(strconv.FormatUint(uint64(st.Uid), 10)); err == nil {
				owner = u.Username
			}
		}
	}
	return fmt.Errorf("the data directory %s is not readable by this user (%v): it belongs to the user sealbox runs as. "+
		"Run the command as that user, as the README's systemd install does: sudo -u %s %s --data %s", dir, cause, owner, command, dir)
}

// addDataFlag gives an admin command the --data, --store and --blobs flags
// every subcommand shares.
func addDataFlag(cmd *cobra.Command) *Location {
	loc := new(Location)
	flags := cmd.PersistentFlags()
	addLocationFlags(flags, loc)
	// An admin command works on an instance serve created; it never
	// creates one (serve's help says its directory is created on first
	// start).
	flags.Lookup("data").Usage = "the instance's data directory (server key, transparency log key; by default also the database and the blobs)"
	// Nor does it choose where an instance keeps things: it names where
	// this one keeps them.
	flags.Lookup("store").Usage = "the instance's PostgreSQL database, when it keeps its records there (as serve's --store): postgres://USER@HOST:PORT/DB?sslmode=... (the password from PGPASSWORD or PGPASSFILE, not the URL: ps shows the command line)"
	flags.Lookup("blobs").Usage = "the instance's S3-compatible bucket, when it keeps its blobs there (as serve's --blobs): s3://BUCKET?endpoint=URL&region=R (credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
	documentEnv(flags)
	return loc
}
