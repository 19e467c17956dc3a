package kv

import (
	"errors"
	"time"

	"sealbox/kv/fault"
)

// The sync feed is the album's applied ops in sync_seq order, written by
// ApplyOp. Its keys are albumID|0x00|sync_seq (8 bytes, big-endian), so a
// page is one Seek and a walk that never leaves the album's rows.

// FeedEntry is one applied op. Optional hashes are "" when absent.
type FeedEntry struct {
	SyncSeq          uint64
	AssetID          string
	Action           string
	ManifestHash     string
	CiphertextHash   string
	MetadataBlobHash string
	OriginalBlobHash string
	AppliedAt        time.Time
}

type feedRecord struct {
	AssetID          string    `cbor:"1,keyasint"`
	Action           string    `cbor:"2,keyasint"`
	ManifestHash     string    `cbor:"3,keyasint"`
	CiphertextHash   string    `cbor:"4,keyasint"`
	MetadataBlobHash string    `cbor:"5,keyasint,omitempty"`
	OriginalBlobHash string    `cbor:"6,keyasint,omitempty"`
	AppliedAt        time.Time `cbor:"7,keyasint"`
}

func feedKey(albumID string, seq uint64) []byte { return join(idPart(albumID), u64(seq)) }

func putFeedEntry(tx Tx, albumID string, e *FeedEntry) error {
	rec := feedRecord{
		AssetID: e.AssetID, Action: e.Action, ManifestHash: e.ManifestHash, CiphertextHash: e.CiphertextHash,
		MetadataBlobHash: e.MetadataBlobHash, OriginalBlobHash: e.OriginalBlobHash, AppliedAt: e.AppliedAt,
	}
	return tx.Bucket(bucketFeed).Put(feedKey(albumID, e.SyncSeq), encode(&rec))
}

func decodeFeedEntry(seq uint64, b []byte) (FeedEntry, error) {
	var rec feedRecord
	if err := decode(b, &rec); err != nil {
		return FeedEntry{}, err
	}
	return FeedEntry{
		SyncSeq: seq, AssetID: rec.AssetID, Action: rec.Action, ManifestHash: rec.ManifestHash,
		CiphertextHash: rec.CiphertextHash, MetadataBlobHash: rec.MetadataBlobHash, OriginalBlobHash: rec.OriginalBlobHash,
		AppliedAt: rec.AppliedAt,
	}, nil
}

// errMissingFeedEntry is a damaged store: the replay index points at a feed
// entry that is not there: an internal error, not the caller's.
var errMissingFeedEntry = errors.New("kv: the replay index names a missing feed entry")

// getFeedEntry reads the entry the replay index points at.
func getFeedEntry(tx Tx, albumID string, seq uint64) (FeedEntry, error) {
	b, err := tx.Bucket(bucketFeed).Get(feedKey(albumID, seq))
	if err != nil {
		return FeedEntry{}, err
	}
	if b == nil {
		return FeedEntry{}, errMissingFeedEntry
	}
	return decodeFeedEntry(seq, b)
}

// Feed returns up to limit entries of the account's album with sync_seq
// above after, oldest first, and whether more follow. An album that does not
// exist or is another account's is error.album.forbidden, as for ops.
func (s *Store) Feed(accountID, albumID string, after uint64, limit int) (entries []FeedEntry, hasMore bool, err error) {
	err = s.view(func(tx Tx) error {
		a, err := getAlbum(tx, albumID)
		if err != nil {
			return err
		}
		if a == nil || a.OwnerID != accountID {
			return fault.Errorf(fault.ECodeAlbumForbidden, "the album does not exist or belongs to another account")
		}
		prefix := idPart(albumID)
		// Feed keys have one length, so the least key after feedKey(after)
		// is feedKey(after) with a 0x00 appended. One entry past the page
		// tells whether more follow.
		page := Range{From: append(feedKey(albumID, after), 0), To: prefixEnd(prefix), Limit: limit + 1}
		entries, hasMore = nil, false
		return tx.Bucket(bucketFeed).Scan(page, func(k, v []byte) error {
			if len(entries) == limit {
				hasMore = true
				return ErrStopScan
			}
			e, err := decodeFeedEntry(readU64(k[len(prefix):]), v)
			if err != nil {
				return err
			}
			entries = append(entries, e)
			return nil
		})
	})
	if err != nil {
		return nil, false, err
	}
	return entries, hasMore, nil
}
