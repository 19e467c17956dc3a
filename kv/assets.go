package kv

import (
	"sealbox/kv/fault"
)

// An album's assets are its rows of the assets bucket, albumID|0x00|assetID
// -> the asset's chain head (the manifest hash of its last applied op), in
// asset-id order; the applied-manifests index maps that head to the op's
// feed position. A device that starts on an album reads the assets once,
// each as the feed entry of its head, and then follows the feed from the
// album's sync_seq at the first page (server/PROTOCOL.md §9): it never
// replays the whole history of an album.

// Assets returns up to limit of the account's album's assets with ids
// above after ("" for the first page), in id order, each as the feed entry
// of its chain head; whether more follow; and the album's sync_seq when the
// page was read. An album that does not exist or is another account's is
// error.album.forbidden, as for ops and the feed.
func (s *Store) Assets(accountID, albumID, after string, limit int) (assets []FeedEntry, hasMore bool, syncSeq uint64, err error) {
	err = s.view(func(tx Tx) error {
		a, err := getAlbum(tx, albumID)
		if err != nil {
			return err
		}
		if a == nil || a.OwnerID != accountID {
			return fault.Errorf(fault.ECodeAlbumForbidden, "the album does not exist or belongs to another account")
		}
		prefix := idPart(albumID)
		from := prefix
		if after != "" {
			// The least key above the asset after's own.
			from = append(assetKey(albumID, after), 0)
		}
		assets, hasMore, syncSeq = nil, false, a.SyncSeq
		page := Range{From: from, To: prefixEnd(prefix), Limit: limit + 1}
		return tx.Bucket(bucketAssets).Scan(page, func(k, v []byte) error {
			if len(assets) == limit {
				hasMore = true
				return ErrStopScan
			}
			var rec assetRecord
			if err := decode(v, &rec); err != nil {
				return err
			}
			seq := rec.Seq
			if seq == 0 {
				v, err := tx.Bucket(bucketAppliedManifests).Get(appliedKey(albumID, rec.Head))
				if err != nil {
					return err
				}
				if len(v) != 8 {
					return errMissingFeedEntry
				}
				seq = readU64(v)
			}
			e, err := getFeedEntry(tx, albumID, seq)
			if err != nil {
				return err
			}
			assets = append(assets, e)
			return nil
		})
	})
	if err != nil {
		return nil, false, 0, err
	}
	return assets, hasMore, syncSeq, nil
}
