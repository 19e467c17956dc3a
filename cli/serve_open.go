package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"sealbox/blobs"
	"sealbox/cli/admin"
	"sealbox/kv"
	"sealbox/server"
	"sealbox/server/content"
	"sealbox/server/secrets"
)

// open readies what the server runs on, in an order that keeps a failed
// start from leaving anything behind: the engines other machines hold (the
// bucket, then PostgreSQL) are reached first, so a typo in either fails
// before the data directory, a key, a node id or a missing bucket is
// created and before the store is bound to this node's keys; then the keys and the node id are
// read, or made in memory at the first start, and a store elsewhere is
// checked against them; then the data directory is locked and the engines
// in it opened; the store is checked, writing nothing, as bind will: against
// the keys, with the blob store as one instance, its transparency log
// whole; and only then are a missing bucket created and the keys and node
// id a first start made written. The store is bound to the keys, the record and blob stores to
// one instance, and the leases the node's previous run held are released.
//
// release closes the store and gives up the data directory's lock.
func (s *Serve) open(ctx context.Context) (store *kv.Store, blobStore blobs.Engine, format int, release func(), err error) {
	log := s.Config.Log
	unlock := func() {}
	defer func() {
		if err != nil && store != nil {
			store.Close()
		}
		if err != nil {
			unlock()
		}
	}()
	if err := s.refuseLocalStoreBeside(); err != nil {
		return nil, nil, 0, nil, err
	}
	if s.Store == "" {
		if err := admin.RefuseChunkedGeneration(s.Data); err != nil {
			return nil, nil, 0, nil, err
		}
	}
	// A missing bucket is created once everything else has been checked.
	createBucket := false
	if s.Blobs != "" {
		blobStore, err = s.openBucket(ctx, log, false)
		switch {
		case errors.Is(err, errNoBucket):
			createBucket = true
		case err != nil:
			return nil, nil, 0, nil, err
		}
	}
	if s.Store != "" {
		if store, err = s.openStoreFor(ctx, forServe, s.storeOptions()); err != nil {
			return nil, nil, 0, nil, err
		}
		if err := s.refuseUnfinishedRestore(store); err != nil {
			return store, nil, 0, nil, err
		}
	}
	var made []newFile
	key, err := readSealKey(filepath.Join(s.Data, keyFile), &made)
	if err != nil {
		return store, nil, 0, nil, err
	}
	s.Config.SealKey = key
	if s.Config.LogKey, err = readLogKey(filepath.Join(s.Data, admin.LogKeyFile), s.LogOrigin, &made); err != nil {
		return store, nil, 0, nil, err
	}
	if s.Config.NodeID, err = readNodeID(s.Data, &made); err != nil {
		return store, nil, 0, nil, err
	}
	// A store elsewhere is checked before the data directory is made, and
	// so is the bucket beside it.
	if store != nil {
		if err := s.checkKeys(store); err != nil {
			return store, nil, 0, nil, err
		}
	}
	if store != nil && s.Blobs != "" {
		if err := s.checkData(store, blobStore); err != nil {
			return store, nil, 0, nil, err
		}
	}
	if err := os.MkdirAll(s.Data, 0o700); err != nil {
		return store, nil, 0, nil, fmt.Errorf("create data directory: %w", err)
	}
	// Locked before a key, the node id or the store file is written: two
	// serves would race to make the keys, and a compact replaces the store.
	if unlock, err = lockDataDir(s.Data); err != nil {
		unlock = func() {}
		if errors.Is(err, errDataDirLocked) {
			err = fmt.Errorf("another sealbox serve runs on this data directory, or sealbox compact does (%w): one node per data directory, and compact only with the server stopped", err)
		}
		return store, nil, 0, nil, err
	}
	if s.Store == "" || s.Blobs == "" {
		if store == nil {
			if store, err = s.openStoreFor(ctx, forServe, s.storeOptions()); err != nil {
				return nil, nil, 0, nil, err
			}
			if err := s.checkKeys(store); err != nil {
				return store, nil, 0, nil, err
			}
		}
		if s.Blobs == "" {
			if blobStore, err = s.openBlobs(ctx, blobsOpen{}); err != nil {
				return store, nil, 0, nil, fmt.Errorf("open blob store: %w", err)
			}
		}
		if err := s.checkData(store, blobStore); err != nil {
			return store, nil, 0, nil, err
		}
	}
	if createBucket {
		if blobStore, err = s.openBucket(ctx, log, true); err != nil {
			return store, nil, 0, nil, err
		}
	}
	if err := writeNewFiles(made); err != nil {
		return store, nil, 0, nil, err
	}
	if format, err = s.bind(store, blobStore, key); err != nil {
		return store, nil, 0, nil, err
	}
	return store, blobStore, format, func() { store.Close(); unlock() }, nil
}

// checkKeys and checkData refuse, writing nothing, what bind would refuse,
// before the node writes any key it made. checkKeys: a store first started
// with other keys than this node's.
func (s *Serve) checkKeys(store *kv.Store) error {
	if err := store.CheckNodeKeys(secrets.Fingerprint(s.Config.SealKey), s.Config.LogKey.VerifierKey); err != nil {
		return refuseKeys(err)
	}
	return nil
}

// checkData: a record store and a blob store of two instances (bind's own
// check, which marks them, refuses exactly what instanceRead refuses; a
// bucket still to be created, blobStore nil, holds nothing to refuse), and
// a transparency log that does not extend what was signed (signing on top
// of it would show clients two histories).
func (s *Serve) checkData(store *kv.Store, blobStore blobs.Engine) error {
	if blobStore != nil {
		if _, err := bindInstance(s.Location, store, blobStore, instanceRead); err != nil {
			return fmt.Errorf("refusing to start: %w", err)
		}
	}
	if err := store.VerifyLog(); err != nil {
		return fmt.Errorf("refusing to start: %w", err)
	}
	return nil
}

// refuseKeys is the refusal of a node whose keys are not the store's.
func refuseKeys(err error) error {
	return fmt.Errorf("refusing to start: %w (copy %s and %s from the data directory of a node that runs)", err, keyFile, admin.LogKeyFile)
}

// storeOptions opens the store for serving: migrated, after saying which
// migrations run.
func (s *Serve) storeOptions() kv.Options {
	log := s.Config.Log
	return kv.Options{
		Now: s.Config.Now, Version: server.Version, NoMigrate: s.NoMigrate,
		BeforeMigrate: func(from int, pending []kv.Migration) {
			log.Warn().Int("from", from).Int("to", kv.FormatVersion).Msg("migrating the store; each step is one transaction")
			for _, m := range pending {
				log.Warn().Int("format", m.To).Msg("migration: " + m.Name)
			}
		},
	}
}

// openBucket opens the bucket --blobs names, creating it when it is
// missing and create is set, and says so (without create, a missing bucket
// is an error wrapping s3.ErrNoBucket); and says when the URL sends the
// blobs to AWS. The engine registers its series on a registry the server's
// metrics serve.
func (s *Serve) openBucket(ctx context.Context, log zerolog.Logger, create bool) (blobs.Engine, error) {
	metrics := prometheus.NewRegistry()
	s.Config.EngineMetrics = metrics
	engine, err := s.openBlobs(ctx, blobsOpen{metrics: metrics, createBucket: create})
	if err != nil {
		return nil, fmt.Errorf("open blob store: %w", err)
	}
	b := engine.(bucket) // s.Blobs names a bucket
	if !hasEndpoint(s.Blobs) {
		log.Warn().Str("bucket", b.Bucket()).Msg("the s3:// URL has no endpoint=, so the blobs go to " + b.Endpoint() + "; for another S3-compatible store add ?endpoint=https://HOST")
	}
	if b.CreatedBucket() {
		log.Info().Str("bucket", b.Bucket()).Str("endpoint", b.Endpoint()).Msg("the bucket did not exist; created it")
	}
	return engine, nil
}

// bind binds the store (checked by checkKeys and checkData) to this node's
// keys and the record and blob stores to one instance, moves the small blob
// files into the store (content.MoveInline: only once the two are known to
// belong together) and releases the leases this node's previous run held
// (the sweep's and the witness's among them). It returns the store's
// format. Run signs the log's first checkpoint, with the one log it hands
// the server and the witness worker.
func (s *Serve) bind(store *kv.Store, blobStore blobs.Engine, key []byte) (int, error) {
	log := s.Config.Log
	format, _, err := store.Format()
	if err != nil {
		return 0, err
	}
	if _, err := bindInstance(s.Location, store, blobStore, instanceServe); err != nil {
		return 0, fmt.Errorf("refusing to start: %w", err)
	}
	// Store format 6 completes here: the blob files of at most the inline
	// threshold move into the store, at once when a start with the same
	// threshold did it before; a start cut short leaves no damage and the
	// next one carries on.
	moved, err := content.New(store, blobStore, s.Config.InlineMax).MoveInline()
	if moved > 0 {
		log.Info().Int("blobs", moved).Int64("inline_max", s.Config.InlineMax).Msg("moved small blob files into the store")
	}
	if err != nil {
		return 0, fmt.Errorf("move small blob files into the store: %w", err)
	}
	// A node with other keys would seal secrets the other nodes cannot
	// open and sign checkpoints under another key.
	rebound, err := store.BindNodeKeys(secrets.Fingerprint(key), s.Config.LogKey.VerifierKey)
	if err != nil {
		return 0, refuseKeys(err)
	}
	if rebound {
		log.Warn().Str("store", s.describeStore()).Msg("the store never served (no account, no log record) and was bound to other keys, by a start that failed: bound it to this node's keys")
	}
	released, err := store.ReleaseLeasesOf(s.Config.NodeID + "/")
	if err != nil {
		return 0, err
	}
	if released > 0 {
		log.Info().Int("leases", released).Str("node", s.Config.NodeID).Msg("released the leases this node's previous run held (transfers it was writing resume at once)")
	}
	return format, nil
}

// hasEndpoint reports whether an s3:// URL names its endpoint.
func hasEndpoint(rawURL string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && u.Query().Has("endpoint")
}
