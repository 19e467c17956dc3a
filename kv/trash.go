package kv

import (
	"bytes"
	"time"

	"sealbox/kv/engine"
	"sealbox/kv/fault"
)

// Deleting a photo (server/PROTOCOL.md §9) appends a signed tombstone to the
// asset's chain, as an op appends a manifest: the tombstone becomes the
// head, the feed carries an entry of action "delete", and the asset goes to
// the trash. Until its purge instant its owner may restore it, which puts
// back the head it had (a feed entry of action "restore"). At the purge
// instant the trash sweep (kindTrash) releases the blobs the asset's chain
// named that no other asset of the account names (asset_blobs, blob_refs),
// so quota returns and gc frees what nobody holds any more; the asset stays,
// its tombstone the head, so its id is never reused.

// Feed actions beside the lifecycle ops'.
const (
	ActionDelete  = "delete"
	ActionRestore = "restore"
)

// Tombstone is a signed tombstone whose envelope the server has decoded and
// checked for shape.
type Tombstone struct {
	AlbumID         string
	AssetID         string
	ProtocolVersion string
	CreatedByUser   string
	// PriorHash is the chain head the tombstone ends.
	PriorHash string
	// Manifest is the tombstone as sent: its hash is the new head, and it
	// is kept as a blob the account holds for good.
	Manifest Blob
}

func assetDeleted() *fault.Error {
	return fault.Errorf(fault.ECodeAssetDeleted, "the asset is deleted; restore it from the trash first")
}

// nameBlob records that the asset's chain names hash (nothing for ""), and
// counts the asset among those of the account that name it, once.
func nameBlob(tx Tx, accountID, albumID, assetID, hash string) error {
	if hash == "" {
		return nil
	}
	key := join(assetKey(albumID, assetID), []byte(hash))
	if named, err := has(tx, bucketAssetBlobs, key); named || err != nil {
		return err
	}
	if err := tx.Bucket(bucketAssetBlobs).Put(key, member); err != nil {
		return err
	}
	ref := join(idPart(accountID), []byte(hash))
	v, err := tx.Bucket(bucketBlobRefs).Get(ref)
	if err != nil {
		return err
	}
	n := uint64(0)
	if len(v) == 8 {
		n = readU64(v)
	}
	return tx.Bucket(bucketBlobRefs).Put(ref, u64(n+1))
}

// checkTombstone runs the store's checks of a tombstone in the battery's
// order (server/PROTOCOL.md §9): the album, its pinned protocol, the author,
// replay, then the chain; then the quota of the tombstone's bytes. It
// returns the asset's record for the apply, or a replay's result.
func checkTombstone(tx Tx, accountID string, t *Tombstone) (*Album, *assetRecord, *OpResult, error) {
	a, err := getAlbum(tx, t.AlbumID)
	if err != nil {
		return nil, nil, nil, err
	}
	if a == nil || a.OwnerID != accountID {
		return nil, nil, nil, fault.Errorf(fault.ECodeAlbumForbidden, "the album does not exist or belongs to another account")
	}
	if t.ProtocolVersion != a.ProtocolVersion {
		return nil, nil, nil, refuse(RuleOpProtocol, t.ProtocolVersion, a.ProtocolVersion)
	}
	if t.CreatedByUser != accountID {
		return nil, nil, nil, refuse(RuleOpAuthor)
	}
	seq, err := tx.Bucket(bucketAppliedManifests).Get(appliedKey(t.AlbumID, t.Manifest.Hash))
	if err != nil {
		return nil, nil, nil, err
	}
	if seq != nil {
		e, err := getFeedEntry(tx, t.AlbumID, readU64(seq))
		if err != nil {
			return nil, nil, nil, err
		}
		return a, nil, &OpResult{AssetID: e.AssetID, SyncSeq: e.SyncSeq, Action: e.Action, Replayed: true}, nil
	}
	if a.deleted() {
		return nil, nil, nil, albumDeleted()
	}
	asset, err := getRecord[assetRecord](tx, bucketAssets, assetKey(t.AlbumID, t.AssetID))
	switch {
	case err != nil:
		return nil, nil, nil, err
	case asset == nil:
		return nil, nil, nil, staleChain("", "a tombstone names an asset that does not exist")
	case t.PriorHash != asset.Head:
		return nil, nil, nil, staleChain(asset.Head, "prior_provenance_hash is not the asset's chain head")
	case asset.deleted():
		return nil, nil, nil, assetDeleted()
	}
	if err := checkOpQuota(tx, accountID, []Blob{t.Manifest}); err != nil {
		return nil, nil, nil, err
	}
	return a, asset, nil, nil
}

func tombstoneReads(accountID string, t *Tombstone) func() []engine.Key {
	return func() []engine.Key {
		return []engine.Key{
			{Bucket: bucketAlbums, Key: []byte(t.AlbumID)},
			{Bucket: bucketAppliedManifests, Key: appliedKey(t.AlbumID, t.Manifest.Hash)},
			{Bucket: bucketAssets, Key: assetKey(t.AlbumID, t.AssetID)},
			{Bucket: bucketAppliedManifests, Key: appliedKey(t.AlbumID, t.PriorHash)},
			{Bucket: bucketUsage, Key: []byte(accountID)},
			{Bucket: bucketAccounts, Key: []byte(accountID)},
			{Bucket: bucketHoldings, Key: holdingKey(accountID, t.Manifest.Hash)},
			{Bucket: bucketBlobs, Key: []byte(t.Manifest.Hash)},
		}
	}
}

// CheckTombstone runs the store's checks of a tombstone without writing, so
// a refused one is refused before its bytes reach the disk. It returns the
// first application's result for a tombstone already applied in the album.
// ApplyTombstone checks again.
func (s *Store) CheckTombstone(accountID string, t *Tombstone) (*OpResult, error) {
	var res *OpResult
	err := s.view(func(tx Tx) (err error) {
		_, _, res, err = checkTombstone(tx, accountID, t)
		return err
	})
	return res, err
}

// ApplyTombstone deletes the asset in one transaction: it re-runs the
// checks, takes the album's next sync_seq for a feed entry of action
// "delete" (carrying the deleted version's hashes beside the tombstone's),
// makes the tombstone the head, holds its bytes, and puts the asset in the
// trash until purgeAt. A tombstone already applied is answered from its
// first application.
func (s *Store) ApplyTombstone(accountID string, t *Tombstone, purgeAt time.Time) (*OpResult, error) {
	var res *OpResult
	err := s.commitBatched(tombstoneReads(accountID, t), func(tx Tx) (refusal, err error) {
		res = nil // fn may run more than once
		a, asset, replay, err := checkTombstone(tx, accountID, t)
		if err != nil {
			refusal, err = asRefusal(err)
			return refusal, err
		}
		if replay != nil {
			res = replay
			return nil, nil
		}
		now := s.now()
		live, err := headEntry(tx, t.AlbumID, asset.Head)
		if err != nil {
			return nil, err
		}
		a.SyncSeq++
		if err := putAlbum(tx, a); err != nil {
			return nil, err
		}
		if err := putFeedEntry(tx, t.AlbumID, &FeedEntry{
			SyncSeq: a.SyncSeq, AssetID: t.AssetID, Action: ActionDelete, ManifestHash: t.Manifest.Hash,
			CiphertextHash: live.CiphertextHash, MetadataBlobHash: live.MetadataBlobHash, OriginalBlobHash: live.OriginalBlobHash,
			AppliedAt: now,
		}); err != nil {
			return nil, err
		}
		if err := tx.Bucket(bucketAppliedManifests).Put(appliedKey(t.AlbumID, t.Manifest.Hash), u64(a.SyncSeq)); err != nil {
			return nil, err
		}
		key := assetKey(t.AlbumID, t.AssetID)
		rec := assetRecord{Head: t.Manifest.Hash, DeletedAt: now, RestoreHead: asset.Head, PurgeAt: purgeAt}
		if err := tx.Bucket(bucketAssets).Put(key, encode(&rec)); err != nil {
			return nil, err
		}
		if _, err := holdBlob(tx, accountID, t.Manifest, now); err != nil {
			return nil, err
		}
		res = &OpResult{AssetID: t.AssetID, SyncSeq: a.SyncSeq, Action: ActionDelete}
		return nil, putExpiry(tx, purgeAt, kindTrash, key)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// headEntry is the feed entry of the op that made head the chain head.
func headEntry(tx Tx, albumID, head string) (FeedEntry, error) {
	seq, err := tx.Bucket(bucketAppliedManifests).Get(appliedKey(albumID, head))
	if err != nil {
		return FeedEntry{}, err
	}
	if len(seq) != 8 {
		return FeedEntry{}, errMissingFeedEntry
	}
	return getFeedEntry(tx, albumID, readU64(seq))
}

// RestoreAsset takes the account's deleted asset out of the trash before
// its purge: the head it had before the tombstone is its head again, and
// the album's next sync_seq carries a feed entry of action "restore" with
// that head's hashes. An asset not in the trash (live, purged, unknown, or
// in another account's album) is error.asset.not_in_trash.
func (s *Store) RestoreAsset(accountID, albumID, assetID string) (*OpResult, error) {
	var res *OpResult
	err := s.update(func(tx Tx) error {
		res = nil
		now := s.now()
		notInTrash := fault.Errorf(fault.ECodeAssetNotInTrash, "the asset is not in the trash")
		a, err := getAlbum(tx, albumID)
		if err != nil {
			return err
		}
		if a == nil || a.OwnerID != accountID {
			return notInTrash
		}
		if a.deleted() {
			return albumDeleted()
		}
		key := assetKey(albumID, assetID)
		asset, err := getRecord[assetRecord](tx, bucketAssets, key)
		if err != nil {
			return err
		}
		if asset == nil || !asset.deleted() || asset.Purged || reached(asset.PurgeAt, now) {
			return notInTrash
		}
		restored, err := headEntry(tx, albumID, asset.RestoreHead)
		if err != nil {
			return err
		}
		a.SyncSeq++
		if err := putAlbum(tx, a); err != nil {
			return err
		}
		if err := putFeedEntry(tx, albumID, &FeedEntry{
			SyncSeq: a.SyncSeq, AssetID: assetID, Action: ActionRestore, ManifestHash: asset.RestoreHead,
			CiphertextHash: restored.CiphertextHash, MetadataBlobHash: restored.MetadataBlobHash, OriginalBlobHash: restored.OriginalBlobHash,
			AppliedAt: now,
		}); err != nil {
			return err
		}
		if err := deleteExpiry(tx, asset.PurgeAt, kindTrash, key); err != nil {
			return err
		}
		if err := tx.Bucket(bucketAssets).Put(key, encode(&assetRecord{Head: asset.RestoreHead})); err != nil {
			return err
		}
		res = &OpResult{AssetID: assetID, SyncSeq: a.SyncSeq, Action: ActionRestore}
		return nil
	})
	return res, err
}

// sweepTrash purges the asset under key once its purge instant is reached:
// every blob its chain named is unnamed by it, and a blob no other asset of
// the account names is released (releaseBlob). The asset stays, deleted and
// purged, so its id is never reused.
func sweepTrash(tx Tx, key []byte, now time.Time) error {
	asset, err := getRecord[assetRecord](tx, bucketAssets, key)
	if err != nil || asset == nil || !asset.deleted() || asset.Purged || !reached(asset.PurgeAt, now) {
		return err
	}
	// assetKey: the album id, its 0x00 terminator, the asset id.
	a, err := getAlbum(tx, string(key[:bytes.IndexByte(key, 0)]))
	if err != nil || a == nil {
		return err
	}
	if err := unnameAssetBlobs(tx, a.OwnerID, key); err != nil {
		return err
	}
	asset.Purged = true
	return tx.Bucket(bucketAssets).Put(key, encode(asset))
}

// unnameAssetBlobs removes the asset's asset_blobs rows (under key, its
// assetKey) and counts it out of each blob's refs, releasing the blobs no
// other asset of the account names.
func unnameAssetBlobs(tx Tx, accountID string, key []byte) error {
	named, err := prefixKeys(tx.Bucket(bucketAssetBlobs), key)
	if err != nil {
		return err
	}
	for _, k := range named {
		hash := string(k[len(key):])
		if err := tx.Bucket(bucketAssetBlobs).Delete(k); err != nil {
			return err
		}
		ref := join(idPart(accountID), []byte(hash))
		v, err := tx.Bucket(bucketBlobRefs).Get(ref)
		if err != nil {
			return err
		}
		if len(v) == 8 && readU64(v) > 1 {
			if err := tx.Bucket(bucketBlobRefs).Put(ref, u64(readU64(v)-1)); err != nil {
				return err
			}
			continue
		}
		if err := tx.Bucket(bucketBlobRefs).Delete(ref); err != nil {
			return err
		}
		if _, err := releaseBlob(tx, accountID, hash); err != nil {
			return err
		}
	}
	return nil
}

func (a *Album) deleted() bool { return !a.DeletedAt.IsZero() }

func albumDeleted() *fault.Error {
	return fault.Errorf(fault.ECodeAlbumDeleted, "the album is deleted; restore it from the trash first")
}

// AlbumTombstone is a signed tombstone of a whole album, checked for shape
// by the server.
type AlbumTombstone struct {
	AlbumID         string
	ProtocolVersion string
	CreatedByUser   string
	Manifest        Blob
}

// AlbumTrashResult is the outcome of DeleteAlbum or RestoreAlbum.
type AlbumTrashResult struct {
	// SyncSeq is the album's last feed position after the act; Assets
	// counts the assets it deleted or restored.
	SyncSeq  uint64
	Assets   int
	Replayed bool
}

// DeleteAlbum deletes the account's album with a signed tombstone, in one
// transaction: every live asset of it is deleted as ApplyTombstone deletes
// one (a feed entry of action "delete" each, the album's tombstone as
// head, the trash until purgeAt), and the album is deleted: nothing is
// added to it until RestoreAlbum. Its id stays taken. The same tombstone
// sent again is a replay, answered as the first time.
func (s *Store) DeleteAlbum(accountID string, t *AlbumTombstone, purgeAt time.Time) (*AlbumTrashResult, error) {
	var res *AlbumTrashResult
	err := s.update(func(tx Tx) error {
		res = nil
		now := s.now()
		a, err := getAlbum(tx, t.AlbumID)
		if err != nil {
			return err
		}
		switch {
		case a == nil || a.OwnerID != accountID:
			return fault.Errorf(fault.ECodeAlbumForbidden, "the album does not exist or belongs to another account")
		case t.ProtocolVersion != a.ProtocolVersion:
			return refuse(RuleOpProtocol, t.ProtocolVersion, a.ProtocolVersion)
		case t.CreatedByUser != accountID:
			return refuse(RuleOpAuthor)
		case a.deleted() && a.Tombstone == t.Manifest.Hash:
			res = &AlbumTrashResult{SyncSeq: a.SyncSeq, Replayed: true}
			return nil
		case a.deleted():
			return albumDeleted()
		}
		if err := checkOpQuota(tx, accountID, []Blob{t.Manifest}); err != nil {
			return err
		}
		if _, err := holdBlob(tx, accountID, t.Manifest, now); err != nil {
			return err
		}
		res = &AlbumTrashResult{}
		prefix := idPart(t.AlbumID)
		type live struct {
			key []byte
			rec assetRecord
		}
		var assets []live
		err = scanPrefix(tx.Bucket(bucketAssets), prefix, func(k, v []byte) error {
			var rec assetRecord
			if err := decode(v, &rec); err != nil {
				return err
			}
			if !rec.deleted() {
				assets = append(assets, live{bytes.Clone(k), rec})
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, l := range assets {
			e, err := headEntry(tx, t.AlbumID, l.rec.Head)
			if err != nil {
				return err
			}
			a.SyncSeq++
			assetID := string(l.key[len(prefix):])
			if err := putFeedEntry(tx, t.AlbumID, &FeedEntry{
				SyncSeq: a.SyncSeq, AssetID: assetID, Action: ActionDelete, ManifestHash: t.Manifest.Hash,
				CiphertextHash: e.CiphertextHash, MetadataBlobHash: e.MetadataBlobHash, OriginalBlobHash: e.OriginalBlobHash,
				AppliedAt: now,
			}); err != nil {
				return err
			}
			rec := assetRecord{Head: t.Manifest.Hash, DeletedAt: now, RestoreHead: l.rec.Head, PurgeAt: purgeAt, Seq: a.SyncSeq, WithAlbum: true}
			if err := tx.Bucket(bucketAssets).Put(l.key, encode(&rec)); err != nil {
				return err
			}
			if err := putExpiry(tx, purgeAt, kindTrash, l.key); err != nil {
				return err
			}
		}
		a.DeletedAt, a.Tombstone, a.PurgeAt = now, t.Manifest.Hash, purgeAt
		res.SyncSeq, res.Assets = a.SyncSeq, len(assets)
		return putAlbum(tx, a)
	})
	return res, err
}

// RestoreAlbum takes the account's deleted album out of the trash before
// its purge, with every asset its deletion deleted (a feed entry of action
// "restore" each); assets deleted one by one before it stay deleted. An
// album not in the trash is error.album.not_in_trash.
func (s *Store) RestoreAlbum(accountID, albumID string) (*AlbumTrashResult, error) {
	var res *AlbumTrashResult
	err := s.update(func(tx Tx) error {
		res = nil
		now := s.now()
		a, err := getAlbum(tx, albumID)
		if err != nil {
			return err
		}
		if a == nil || a.OwnerID != accountID || !a.deleted() || reached(a.PurgeAt, now) {
			return fault.Errorf(fault.ECodeAlbumNotInTrash, "the album is not in the trash")
		}
		prefix := idPart(albumID)
		type deleted struct {
			key []byte
			rec assetRecord
		}
		var back []deleted
		err = scanPrefix(tx.Bucket(bucketAssets), prefix, func(k, v []byte) error {
			var rec assetRecord
			if err := decode(v, &rec); err != nil {
				return err
			}
			if rec.WithAlbum && !rec.Purged {
				back = append(back, deleted{bytes.Clone(k), rec})
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, d := range back {
			e, err := headEntry(tx, albumID, d.rec.RestoreHead)
			if err != nil {
				return err
			}
			a.SyncSeq++
			if err := putFeedEntry(tx, albumID, &FeedEntry{
				SyncSeq: a.SyncSeq, AssetID: string(d.key[len(prefix):]), Action: ActionRestore, ManifestHash: d.rec.RestoreHead,
				CiphertextHash: e.CiphertextHash, MetadataBlobHash: e.MetadataBlobHash, OriginalBlobHash: e.OriginalBlobHash,
				AppliedAt: now,
			}); err != nil {
				return err
			}
			if err := deleteExpiry(tx, d.rec.PurgeAt, kindTrash, d.key); err != nil {
				return err
			}
			if err := tx.Bucket(bucketAssets).Put(d.key, encode(&assetRecord{Head: d.rec.RestoreHead})); err != nil {
				return err
			}
		}
		a.DeletedAt, a.Tombstone, a.PurgeAt = time.Time{}, "", time.Time{}
		res = &AlbumTrashResult{SyncSeq: a.SyncSeq, Assets: len(back)}
		return putAlbum(tx, a)
	})
	return res, err
}
