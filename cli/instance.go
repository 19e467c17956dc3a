package cli

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"sealbox/blobs"
	"sealbox/kv"
	"sealbox/server/ids"
)

// nodeIDFile holds the node's id in its data directory: made at the first
// start, kept across restarts, never copied to another node (backup and
// restore leave it out).
const nodeIDFile = "node-id"

// readNodeID reads the node's id from its data directory, making it at the
// first start, to be written with made.
func readNodeID(dataDir string, made *[]newFile) (string, error) {
	path := filepath.Join(dataDir, nodeIDFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		id := ids.UUID(rand.Reader)
		*made = append(*made, newFile{path: path, data: []byte(id + "\n"), what: "the node id"})
		return id, nil
	}
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(b))
	if id == "" || strings.ContainsAny(id, "/ \t\r\n") {
		return "", fmt.Errorf("%s does not hold a node id: remove it, and a new one is made at the next start", path)
	}
	return id, nil
}

// instanceCheck says how much a command needs to know that the record store
// and the blob store are one instance's.
type instanceCheck int

const (
	// instanceRead refuses what is known to be two instances' (markers that
	// differ, or a marked store beside an unmarked blob store that holds
	// blobs).
	instanceRead instanceCheck = iota
	// instanceRemove (gc) also refuses a blob store holding blobs that no
	// marker proves this instance's: it would delete what the store does
	// not record.
	instanceRemove
	// instanceServe marks what is unmarked (see bindInstance).
	instanceServe
)

// bindInstance checks that store and blobStore belong to one instance, as
// need asks, and with instanceServe gives them one id where they have none:
//
//   - both marked: the ids must be equal.
//   - neither marked (a first start, or the first start after an upgrade
//     from a sealbox without ids): a new id goes into the store (noting that
//     the blob store is being marked), then into the blob store.
//   - the store marked, the blob store not: the blob store is marked if the
//     store notes that it was being marked (a start cut off between the two
//     writes) or it holds no blob; otherwise it may hold another instance's
//     blobs, and is refused.
//   - the blob store marked, the store not: the store adopts the id only if
//     the blob store holds no blob (a fresh store beside a bucket full of
//     blobs would make gc delete them all).
//
// It returns the instance's id ("" when neither is marked and need is not
// instanceServe).
func bindInstance(loc Location, store *kv.Store, blobStore blobs.Engine, need instanceCheck) (string, error) {
	if err := loc.refuseUnfinishedRestore(store); err != nil {
		return "", err
	}
	in, err := store.Instance()
	if err != nil {
		return "", err
	}
	marker, err := blobStore.Instance()
	if err != nil {
		return "", fmt.Errorf("read the instance marker of %s: %w", loc.describeBlobs(), err)
	}
	if in.ID != "" && in.ID == marker {
		if need == instanceServe && in.Marking {
			return in.ID, store.AdoptInstance(in.ID, false)
		}
		return in.ID, nil
	}
	if in.ID != "" && marker != "" {
		return "", fmt.Errorf("the blob store %s belongs to instance %s (its %s marker), but the store %s is instance %s: they are two instances' data, and sealbox will not use them together (check --data, --store and --blobs)",
			loc.describeBlobs(), marker, blobs.InstanceMarker, loc.describeStore(), in.ID)
	}
	held, err := blobs.HoldsBlobs(blobStore)
	if err != nil {
		return "", fmt.Errorf("list %s: %w", loc.describeBlobs(), err)
	}
	switch {
	case marker != "" && held:
		return "", fmt.Errorf("the blob store %s belongs to instance %s (its %s marker) and holds blobs, but the store %s has no instance id: it is not that instance's store (check --data, --store and --blobs)",
			loc.describeBlobs(), marker, blobs.InstanceMarker, loc.describeStore())
	case in.ID != "" && held && !in.Marking:
		return "", fmt.Errorf("the blob store %s holds blobs but no %s marker, and the store %s is instance %s: those blobs may be another instance's (a data directory from before instance ids, or a copy), and sealbox will not use them with this store (check --data, --store and --blobs)",
			loc.describeBlobs(), blobs.InstanceMarker, loc.describeStore(), in.ID)
	case need == instanceRemove && held && in.ID == "":
		return "", fmt.Errorf("neither the store %s nor the blob store %s carries an instance id yet, so nothing proves they are one instance's: start sealbox serve on them once (it marks both), then run gc",
			loc.describeStore(), loc.describeBlobs())
	case need != instanceServe:
		return cmp.Or(in.ID, marker), nil
	}
	return markInstance(store, blobStore, cmp.Or(in.ID, marker, ids.UUID(rand.Reader)))
}

// markInstance gives the store and the blob store the id: the store first,
// noting that the blob store is being marked, so that a start cut off in
// between finishes the marking next time instead of refusing.
func markInstance(store *kv.Store, blobStore blobs.Engine, id string) (string, error) {
	if err := store.AdoptInstance(id, true); err != nil {
		return "", err
	}
	if err := blobStore.MarkInstance(id); err != nil {
		return "", err
	}
	return id, store.AdoptInstance(id, false)
}

// refuseLocalStoreBeside refuses a networked store (--store) when the data
// directory holds a bbolt store with data of its own: serving would start on
// an empty database and leave that data behind, its blobs unreferenced. A
// store file that never served (a start without --store, nothing more) is
// no data; one that cannot be read is taken for data.
func (l Location) refuseLocalStoreBeside() error {
	if !l.networked() {
		return nil
	}
	path := filepath.Join(l.Data, dbFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	if local, err := (Location{Data: l.Data}).openStoreFor(context.Background(), forLooking, kv.Options{ReadOnly: true}); err == nil {
		served, err := local.Served()
		local.Close()
		if err == nil && !served {
			return nil
		}
	}
	return fmt.Errorf("%s holds a sealbox store of its own, but --store names another, %s: going on would leave that data behind. "+
		"To move that instance there: sealbox backup BACKUP --data %s, then sealbox restore BACKUP --data NEWDIR --store %s (see the README's \"Running on several machines\"); to leave it, move %s away",
		path, l.describeStore(), l.Data, l.describeStore(), path)
}

// refuseUnfinishedRestore refuses a store that a restore is still copying
// into: nothing may serve from it, or act on it, before the restore ends.
func (l Location) refuseUnfinishedRestore(store *kv.Store) error {
	in, err := store.Instance()
	if err != nil {
		return err
	}
	if in.Restoring != "" {
		return fmt.Errorf("%s holds a restore that has not finished (of %s): run the same sealbox restore again to finish it", l.describeStore(), in.Restoring)
	}
	return nil
}
