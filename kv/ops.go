package kv

import (
	"time"

	"sealbox/kv/engine"
	"sealbox/kv/fault"
)

// A lifecycle op applies one signed manifest to an asset of an album. The
// store keeps, per album:
//
//   - assets:            albumID|0x00|assetID -> assetRecord: the asset's
//     provenance chain head (the manifest hash of its last applied op), the
//     compare-and-set point of every replace.
//   - applied_manifests: albumID|0x00|manifestHash -> sync_seq (8 bytes): the
//     replay index, so a manifest sent twice is answered from its first
//     application and never applied again.
//   - feed:              albumID|0x00|sync_seq (8 bytes) -> feedRecord (see
//     feed.go), one entry per applied op.
//
// The album's SyncSeq counts its applied ops: each op takes the next one.

// The actions of the lifecycle-write surface.
const (
	OpCreate  = "create"
	OpReplace = "replace"
)

// Op is a lifecycle op whose envelope the server has decoded and checked for
// shape. Hashes are 64-character lowercase hex content addresses; "" is an
// absent optional hash.
type Op struct {
	AlbumID         string
	AssetID         string
	Action          string
	ProtocolVersion string
	CreatedByUser   string
	// PriorHash is the chain position the op continues from.
	PriorHash      string
	CiphertextHash string
	// MetadataBlobHash is the metadata blob the manifest commits to.
	MetadataBlobHash string
	OriginalBlobHash string
	// Manifest is the signed manifest as sent: its hash is the op's manifest
	// hash, and it is stored verbatim as the asset's new provenance blob.
	Manifest Blob
	// Metadata is the metadata blob sent with the op, hashed by the server;
	// nil when none was sent.
	Metadata *Blob
}

// OpResult is the outcome of an applied (or replayed) op.
type OpResult struct {
	AssetID string
	// SyncSeq is the feed position the op occupies; on a replay, the
	// position of its first application.
	SyncSeq  uint64
	Action   string
	Replayed bool
}

type assetRecord struct {
	Head string `cbor:"1,keyasint"`
	// DeletedAt is set while the asset is deleted: Head is its tombstone,
	// RestoreHead the head a restore returns to until PurgeAt, when the
	// trash sweep releases its blobs and sets Purged (see trash.go).
	DeletedAt   time.Time `cbor:"2,keyasint,omitempty"`
	RestoreHead string    `cbor:"3,keyasint,omitempty"`
	PurgeAt     time.Time `cbor:"4,keyasint,omitempty"`
	Purged      bool      `cbor:"5,keyasint,omitempty"`
	// Seq is the feed position of the deletion when the album's deletion
	// made it (Head is then the album's tombstone, which the replay index
	// does not map to one asset's entry); WithAlbum marks such an asset,
	// which the album's restore brings back.
	Seq       uint64 `cbor:"6,keyasint,omitempty"`
	WithAlbum bool   `cbor:"7,keyasint,omitempty"`
}

func (r *assetRecord) deleted() bool { return !r.DeletedAt.IsZero() }

func assetKey(albumID, assetID string) []byte { return join(idPart(albumID), []byte(assetID)) }

func appliedKey(albumID, manifestHash string) []byte {
	return join(idPart(albumID), []byte(manifestHash))
}

// opReads lists the keys checkOp and then applyOp read for op (bar the
// account's open transfers, a scan, and the feed entry of a replay), to be
// read in one exchange where reads cost one each (prefetch): on PostgreSQL
// an op would otherwise wait for a dozen round trips, one after another,
// and so would every op batched behind it. The list is made only by an
// engine that reads it.
func opReads(accountID string, op *Op) func() []engine.Key {
	return func() []engine.Key {
		keys := []engine.Key{
			{Bucket: bucketAlbums, Key: []byte(op.AlbumID)},
			{Bucket: bucketAppliedManifests, Key: appliedKey(op.AlbumID, op.Manifest.Hash)},
			{Bucket: bucketAssets, Key: assetKey(op.AlbumID, op.AssetID)},
			{Bucket: bucketUsage, Key: []byte(accountID)},
			{Bucket: bucketAccounts, Key: []byte(accountID)},
		}
		for _, hash := range []string{op.CiphertextHash, op.OriginalBlobHash} {
			if hash != "" {
				keys = append(keys, engine.Key{Bucket: bucketHoldings, Key: holdingKey(accountID, hash)})
			}
		}
		for _, b := range op.storedBlobs() {
			keys = append(keys,
				engine.Key{Bucket: bucketHoldings, Key: holdingKey(accountID, b.Hash)},
				engine.Key{Bucket: bucketBlobs, Key: []byte(b.Hash)},
				engine.Key{Bucket: bucketTotals, Key: totalsKey(b.Hash)})
		}
		for _, hash := range op.namedBlobs() {
			keys = append(keys,
				engine.Key{Bucket: bucketAssetBlobs, Key: join(assetKey(op.AlbumID, op.AssetID), []byte(hash))},
				engine.Key{Bucket: bucketBlobRefs, Key: join(idPart(accountID), []byte(hash))})
		}
		return keys
	}
}

// namedBlobs are the blobs the op names: its manifest, ciphertext, and
// metadata and original when given.
func (op *Op) namedBlobs() []string {
	var out []string
	for _, h := range []string{op.Manifest.Hash, op.CiphertextHash, op.MetadataBlobHash, op.OriginalBlobHash} {
		if h != "" {
			out = append(out, h)
		}
	}
	return out
}

// storedBlobs are the blobs the op stores and the caller comes to hold.
func (op *Op) storedBlobs() []Blob {
	out := []Blob{op.Manifest}
	if op.Metadata != nil && op.Metadata.Hash != op.Manifest.Hash {
		out = append(out, *op.Metadata)
	}
	return out
}

// staleChain is the error of a chain conflict. head "" (the asset does not
// exist) is answered as chain_head null: a chain conflict with no chain,
// where a protocol mismatch carries no chain_head member at all.
func staleChain(head, format string, args ...any) *fault.Error {
	e := fault.Errorf(fault.ECodeOpStaleChain, format, args...)
	if head == "" {
		e.Details = map[string]any{"chain_head": nil}
	} else {
		e.Details = map[string]any{"chain_head": head}
	}
	return e
}

// checkOp runs the store's part of the validation battery (server/PROTOCOL.md §9), in
// the battery's order: the album (step 4), its pinned protocol (step 4), the
// author (5), the metadata blob and the replace's original (6), the blobs
// the caller must hold (7), replay (8) and the chain (9); then the account's
// quota. Steps 5 and 6 need nothing from the store, but they sit between
// steps that do, so the order is kept in one place. It writes nothing. A
// replay returns its first application's result and no error.
func checkOp(tx Tx, accountID string, op *Op) (*Album, *OpResult, error) {
	if err := prefetch(tx, opReads(accountID, op)); err != nil {
		return nil, nil, err
	}
	a, err := getAlbum(tx, op.AlbumID)
	if err != nil {
		return nil, nil, err
	}
	if a == nil || a.OwnerID != accountID {
		return nil, nil, fault.Errorf(fault.ECodeAlbumForbidden, "the album does not exist or belongs to another account")
	}
	if op.ProtocolVersion != a.ProtocolVersion {
		return nil, nil, refuse(RuleOpProtocol, op.ProtocolVersion, a.ProtocolVersion)
	}
	if op.CreatedByUser != accountID {
		return nil, nil, refuse(RuleOpAuthor)
	}
	if (op.Metadata == nil) != (op.MetadataBlobHash == "") {
		return nil, nil, refuse(RuleOpMetadataSent)
	}
	if op.Metadata != nil && op.Metadata.Hash != op.MetadataBlobHash {
		return nil, nil, refuse(RuleOpMetadataHash)
	}
	if op.Action == OpReplace && op.OriginalBlobHash == "" {
		return nil, nil, refuse(RuleOpReplaceOriginal)
	}
	for _, h := range []struct {
		rule Rule
		hash string
	}{
		{RuleOpCiphertextHeld, op.CiphertextHash},
		{RuleOpOriginalHeld, op.OriginalBlobHash},
	} {
		if h.hash == "" {
			continue
		}
		if held, err := holds(tx, accountID, h.hash); err != nil {
			return nil, nil, err
		} else if !held {
			return nil, nil, refuse(h.rule)
		}
	}
	seq, err := tx.Bucket(bucketAppliedManifests).Get(appliedKey(op.AlbumID, op.Manifest.Hash))
	if err != nil {
		return nil, nil, err
	}
	if seq != nil {
		e, err := getFeedEntry(tx, op.AlbumID, readU64(seq))
		if err != nil {
			return nil, nil, err
		}
		return a, &OpResult{AssetID: e.AssetID, SyncSeq: e.SyncSeq, Action: e.Action, Replayed: true}, nil
	}
	if a.deleted() {
		return nil, nil, albumDeleted()
	}
	asset, err := getRecord[assetRecord](tx, bucketAssets, assetKey(op.AlbumID, op.AssetID))
	if err != nil {
		return nil, nil, err
	}
	head := ""
	if asset != nil {
		head = asset.Head
	}
	switch {
	case op.Action == OpReplace && asset != nil && asset.deleted() && op.PriorHash == head:
		return nil, nil, assetDeleted()
	case op.Action == OpCreate && head != "":
		return nil, nil, staleChain(head, "a create names an asset that already exists")
	case op.Action == OpReplace && head == "":
		return nil, nil, staleChain(head, "a replace names an asset that does not exist")
	case op.Action == OpReplace && op.PriorHash != head:
		return nil, nil, staleChain(head, "prior_provenance_hash is not the asset's chain head")
	}
	if err := checkOpQuota(tx, accountID, op.storedBlobs()); err != nil {
		return nil, nil, err
	}
	return a, nil, nil
}

// checkOpQuota refuses an op whose newly held bytes would take the account
// past its quota, before any blob file is written; holdBlob charges the
// usage and checks again inside the applying transaction.
func checkOpQuota(tx Tx, accountID string, stored []Blob) error {
	var add int64
	for _, b := range stored {
		held, err := holds(tx, accountID, b.Hash)
		if err != nil {
			return err
		}
		if !held {
			add += b.Size
		}
	}
	if add == 0 {
		return nil
	}
	used, err := usage(tx, accountID)
	if err != nil {
		return err
	}
	return checkQuota(tx, accountID, used, add)
}

// CheckOp runs the store's part of the validation battery without writing,
// so a refused op is refused before its blobs reach the disk. It returns the
// first application's result when the manifest was already applied in the
// album, and nil, nil when the op may be applied. ApplyOp checks again: the
// store may change in between.
func (s *Store) CheckOp(accountID string, op *Op) (*OpResult, error) {
	var res *OpResult
	err := s.view(func(tx Tx) (err error) {
		_, res, err = checkOp(tx, accountID, op)
		return err
	})
	return res, err
}

// ApplyOp applies op for the account in one transaction: it re-runs the
// checks of CheckOp against the current state (the chain compare-and-set:
// of concurrent ops on one head exactly one applies, the others get
// error.op.stale_chain), then takes the album's next sync_seq, records the
// feed entry, the replay index entry and the new chain head, and records
// that the account holds the manifest and metadata blobs, which the caller
// has already stored in the blob store. A manifest already applied is
// answered from its first application, writing nothing.
//
// Concurrent ops are committed together (commitBatched).
func (s *Store) ApplyOp(accountID string, op *Op) (*OpResult, error) {
	var res *OpResult
	err := s.commitBatched(opReads(accountID, op), func(tx Tx) (refusal, err error) {
		// Batch may run this function more than once (a batch whose
		// transaction fails is retried), so every result is set afresh.
		res, refusal, err = applyOp(tx, s.now(), accountID, op)
		return refusal, err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// applyOp is ApplyOp inside tx at now. A refusal has written nothing.
func applyOp(tx Tx, now time.Time, accountID string, op *Op) (res *OpResult, refusal, err error) {
	a, replay, err := checkOp(tx, accountID, op)
	if err != nil {
		refusal, err = asRefusal(err) // checkOp has written nothing
		return nil, refusal, err
	}
	if replay != nil {
		return replay, nil, nil
	}
	a.SyncSeq++
	if err := putAlbum(tx, a); err != nil {
		return nil, nil, err
	}
	if err := putFeedEntry(tx, op.AlbumID, &FeedEntry{
		SyncSeq: a.SyncSeq, AssetID: op.AssetID, Action: op.Action, ManifestHash: op.Manifest.Hash,
		CiphertextHash: op.CiphertextHash, MetadataBlobHash: op.MetadataBlobHash, OriginalBlobHash: op.OriginalBlobHash,
		AppliedAt: now,
	}); err != nil {
		return nil, nil, err
	}
	if err := tx.Bucket(bucketAppliedManifests).Put(appliedKey(op.AlbumID, op.Manifest.Hash), u64(a.SyncSeq)); err != nil {
		return nil, nil, err
	}
	if err := tx.Bucket(bucketAssets).Put(assetKey(op.AlbumID, op.AssetID), encode(&assetRecord{Head: op.Manifest.Hash})); err != nil {
		return nil, nil, err
	}
	for _, b := range op.storedBlobs() {
		if _, err := holdBlob(tx, accountID, b, now); err != nil {
			return nil, nil, err
		}
	}
	for _, hash := range op.namedBlobs() {
		if err := nameBlob(tx, accountID, op.AlbumID, op.AssetID, hash); err != nil {
			return nil, nil, err
		}
	}
	return &OpResult{AssetID: op.AssetID, SyncSeq: a.SyncSeq, Action: op.Action}, nil, nil
}
