package cli

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"sealbox/blobs"
	"sealbox/blobs/s3"
	"sealbox/cli/admin"
	"sealbox/kv"
	"sealbox/kv/bolt"
	"sealbox/kv/postgres"
)

// Location says where an instance keeps its data. The data directory
// always holds the node's keys (server.key and the transparency log key,
// the same copy on every node) and, by default, the records (bbolt) and
// the blobs (files). Store and Blobs move those to engines that several
// nodes share.
type Location struct {
	Data string
	// Store is "" for the bbolt file in Data, or a postgres:// URL.
	Store string
	// Blobs is "" for the blobs directory in Data, or an s3:// URL.
	Blobs string
}

// addLocationFlags gives a command --data, --store and --blobs, each also
// read from its SEALBOX_* variable.
func addLocationFlags(fs *pflag.FlagSet, l *Location) {
	fs.StringVar(&l.Data, "data", DefaultDataDir, "data directory (server key, transparency log key; by default also the database and the blobs); created on first start")
	fs.StringVar(&l.Store, "store", "", "keep records in PostgreSQL instead of the data directory's bbolt file: postgres://USER@HOST:PORT/DB?sslmode=... (the password from PGPASSWORD or PGPASSFILE, not the URL: ps shows the command line)")
	fs.StringVar(&l.Blobs, "blobs", "", "keep blobs in an S3-compatible bucket instead of the data directory: s3://BUCKET?endpoint=URL&region=R (credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)")
}

// validate refuses a store or blobs URL of an engine sealbox does not
// have, naming the flag (or variable) as name does.
func (l Location) validate(name func(flag string) string) error {
	if l.Store != "" && !isPostgresURL(l.Store) {
		return fmt.Errorf("%s must be empty (bbolt in the data directory) or a postgres:// URL, not %q", name("store"), redactURL(l.Store))
	}
	if l.Blobs != "" && !strings.HasPrefix(l.Blobs, "s3://") {
		return fmt.Errorf("%s must be empty (files in the data directory) or an s3:// URL, not %q", name("blobs"), redactURL(l.Blobs))
	}
	return nil
}

// networked reports whether the records live in an engine other processes
// (other nodes) may use at the same time: no file lock, no admin socket
// needed.
func (l Location) networked() bool { return l.Store != "" }

func isPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// purpose is what a command opens the engines for. Each engine's own
// options follow from it here, in the one file of cli that names the
// engines (the shape of kine's getKineStorageBackend): the rest of cli,
// and every package below it, sees a *kv.Store and a blobs.Engine.
type purpose int

const (
	// forServe: the server's own store, which keeps its hot pages mapped
	// and waits bbolt's default second for its file lock.
	forServe purpose = iota
	// forAdmin: an admin command or a restore, reading or writing the
	// whole store: its file lock waited for at most adminOpenTimeout, so
	// the command never hangs, and at most adminMappedBudget of the file
	// kept resident.
	forAdmin
	// forLooking: a look at a few records of a store that may be another
	// process's (refuseLocalStoreBeside, dev measure's check): the file
	// lock waited for at most adminOpenTimeout.
	forLooking
	// forFill: dev fill writing a new store, whose commits skip fsync: the
	// file is synced once, at the end (syncFile).
	forFill
)

// openStoreFor opens the record store l names for p (see openStore).
func (l Location) openStoreFor(ctx context.Context, p purpose, opts kv.Options) (*kv.Store, error) {
	var bo bolt.Options
	switch p {
	case forAdmin:
		bo.OpenTimeout, bo.MappedBudget = adminOpenTimeout, adminMappedBudget
	case forLooking:
		bo.OpenTimeout = adminOpenTimeout
	case forFill:
		bo.NoSync = true
	}
	return l.openStore(ctx, opts, bo)
}

// openStore opens the record store l names: PostgreSQL, or the bbolt file
// in the data directory, opened with bo (read-only when opts is; bo means
// nothing to PostgreSQL). This is where an engine is chosen; the store
// asks it for its abilities. Either way a snapshot (backup) is a bbolt
// file, and so is the migrated copy a read-only open of an older format
// reads.
func (l Location) openStore(ctx context.Context, opts kv.Options, bo bolt.Options) (*kv.Store, error) {
	if l.Store != "" {
		e, err := postgres.Open(ctx, l.Store)
		if err != nil {
			return nil, err
		}
		opts.ScratchEngine = bolt.OpenScratch
		return kv.OpenEngine(e, l.describeStore(), opts)
	}
	return openStoreFile(filepath.Join(l.Data, dbFile), opts, bo)
}

// openStoreFile opens the store in the bbolt file at path with bo,
// read-only when opts is; a read-only open of an older format reads a
// migrated copy in a scratch bbolt file.
func openStoreFile(path string, opts kv.Options, bo bolt.Options) (*kv.Store, error) {
	opts.ScratchEngine = bolt.OpenScratch
	bo.ReadOnly = opts.ReadOnly
	e, err := bolt.Open(path, bo)
	if err != nil {
		return nil, err
	}
	return kv.OpenEngine(e, path, opts)
}

// adminMappedBudget is how much of a bbolt store file an admin command
// keeps mapped in its resident memory (bolt.Options.MappedBudget): check,
// gc, backup and restore read every page of the store, and without it
// their resident set would grow to the file's size.
const adminMappedBudget = 64 << 20

// storeFiles is admin.StoreFiles on bbolt, the engine of every store file
// (backups, their scratch copies, a restored data directory): each opened
// with at most adminMappedBudget of it resident.
type storeFiles struct{}

var _ admin.StoreFiles = storeFiles{}

func (storeFiles) Open(path string, opts kv.Options) (*kv.Store, error) {
	return openStoreFile(path, opts, bolt.Options{MappedBudget: adminMappedBudget})
}

// Copy copies through bolt.CopyFile, the bbolt engine's snapshot of a file
// no store of this process holds.
func (storeFiles) Copy(path string, w io.Writer, timeout time.Duration) (int64, error) {
	return bolt.CopyFile(path, w, timeout)
}

// blobsOpen says how openBlobs opens the blob store.
type blobsOpen struct {
	// readOnly opens the blobs directory without creating anything.
	readOnly bool
	// createBucket creates a missing bucket; without it a missing bucket
	// is an error wrapping errNoBucket.
	createBucket bool
	// metrics, when set, is where a bucket registers its series.
	metrics prometheus.Registerer
}

// errNoBucket is openBlobs' error for a bucket that does not exist.
var errNoBucket = s3.ErrNoBucket

// bucket is what messages say of a blob store in a bucket.
type bucket interface {
	Bucket() string
	Endpoint() string
	// CreatedBucket reports whether the open created the bucket.
	CreatedBucket() bool
}

// openBlobs opens the blob store l names: the S3-compatible bucket, or the
// blobs directory in the data directory.
func (l Location) openBlobs(ctx context.Context, o blobsOpen) (blobs.Engine, error) {
	if l.Blobs == "" {
		dir := filepath.Join(l.Data, blobsDir)
		if o.readOnly {
			return blobs.OpenReadOnly(dir), nil
		}
		return blobs.Open(dir)
	}
	return s3.Open(ctx, l.Blobs, s3.Options{Metrics: o.metrics, CreateBucket: o.createBucket})
}

// compactStoreFile compacts the bbolt store file at path in place (see
// bolt.CompactFile), waiting at most adminOpenTimeout for its lock.
func compactStoreFile(path string) (bolt.CompactReport, error) {
	return bolt.CompactFile(path, adminOpenTimeout)
}

// describeBlobs names the blob store for logs and messages.
func (l Location) describeBlobs() string {
	if l.Blobs == "" {
		return filepath.Join(l.Data, blobsDir)
	}
	return redactURL(l.Blobs)
}

// describeStore names the record store for logs and messages, never with
// a password.
func (l Location) describeStore() string {
	if l.Store == "" {
		return filepath.Join(l.Data, dbFile)
	}
	return redactURL(l.Store)
}

// redactURL is raw with any password in it replaced (and any query
// parameter named password), for messages and logs.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an unparsable URL)"
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}
