package kv

import (
	"bytes"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The blob files live in the blob store; the kv store records which blobs
// exist for the service and which accounts hold each one:
//
//   - blobs:    hash -> blobRecord (size, stored_at), one per blob any account
//     holds. It is the set of referenced blobs that gc, check and backup walk
//     (Blobs), and the stored_at a blob read answers as Last-Modified.
//   - holdings: accountID|0x00|hash -> holdingRecord (size, held_at). "Does the
//     caller hold this hash" is one Get (Holds); the bytes an account holds
//     are one prefix scan that never leaves the account's rows (HeldBytes),
//     because the size is copied into each holding.
//
// An account comes to hold a blob by uploading it (AddUploadBlob) and, in
// later features, by the lifecycle ops that store blobs; both call holdBlob
// inside their own transaction. Hashes are the 64-character lowercase hex
// content addresses; the server validates them before they reach the store.

// Blob is a stored blob as the kv store knows it.
type Blob struct {
	Hash string
	Size int64
	// StoredAt is when the blob was first recorded; blob reads answer it as
	// Last-Modified. Set by the store, ignored when passed in.
	StoredAt time.Time
}

type blobRecord struct {
	Size     int64     `cbor:"1,keyasint"`
	StoredAt time.Time `cbor:"2,keyasint"`
}

type holdingRecord struct {
	Size   int64     `cbor:"1,keyasint"`
	HeldAt time.Time `cbor:"2,keyasint"`
}

func holdingKey(accountID, hash string) []byte {
	return join(idPart(accountID), []byte(hash))
}

// holds reports whether the account holds the blob.
func holds(tx *bolt.Tx, accountID, hash string) bool {
	return tx.Bucket(bucketHoldings).Get(holdingKey(accountID, hash)) != nil
}

// holdBlob records that the account holds b, creating the blob's record if
// this is the first holding of it, and reports whether the holding is new
// (false: the account already held the blob, and nothing was written).
func holdBlob(tx *bolt.Tx, accountID string, b Blob, now time.Time) (bool, error) {
	key := holdingKey(accountID, b.Hash)
	if tx.Bucket(bucketHoldings).Get(key) != nil {
		return false, nil
	}
	if tx.Bucket(bucketBlobs).Get([]byte(b.Hash)) == nil {
		rec := blobRecord{Size: b.Size, StoredAt: now}
		if err := tx.Bucket(bucketBlobs).Put([]byte(b.Hash), encode(&rec)); err != nil {
			return false, err
		}
	}
	return true, tx.Bucket(bucketHoldings).Put(key, encode(&holdingRecord{Size: b.Size, HeldAt: now}))
}

// Holds reports whether the account holds the blob (uploaded it, or stored
// it through a lifecycle op).
func (s *Store) Holds(accountID, hash string) (bool, error) {
	var ok bool
	err := s.db.View(func(tx *bolt.Tx) error {
		ok = holds(tx, accountID, hash)
		return nil
	})
	return ok, err
}

// HeldBytes sums the sizes of the blobs the account holds (quota, admin
// listings). A blob held by several accounts counts for each of them.
func (s *Store) HeldBytes(accountID string) (int64, error) {
	var total int64
	err := s.db.View(func(tx *bolt.Tx) (err error) {
		total, err = heldBytes(tx, accountID)
		return err
	})
	return total, err
}

func heldBytes(tx *bolt.Tx, accountID string) (int64, error) {
	var total int64
	prefix := idPart(accountID)
	c := tx.Bucket(bucketHoldings).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var rec holdingRecord
		if err := decode(v, &rec); err != nil {
			return 0, err
		}
		total += rec.Size
	}
	return total, nil
}

// Blobs lists up to limit recorded blobs whose hash sorts after after ("" to
// start), in hash order: every blob some account holds. Callers page through
// it (gc, check, backup) so no read transaction stays open while they touch
// the files.
func (s *Store) Blobs(after string, limit int) ([]Blob, error) {
	var out []Blob
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketBlobs).Cursor()
		k, v := c.Seek([]byte(after))
		if k != nil && string(k) == after {
			k, v = c.Next()
		}
		for ; k != nil && len(out) < limit; k, v = c.Next() {
			var rec blobRecord
			if err := decode(v, &rec); err != nil {
				return err
			}
			out = append(out, Blob{Hash: string(k), Size: rec.Size, StoredAt: rec.StoredAt})
		}
		return nil
	})
	return out, err
}
