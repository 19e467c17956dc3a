package kv

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"sealbox/kv/fault"
)

// The blob files live in the blob store; the kv store records which blobs
// exist for the service and which accounts hold each one:
//
//   - blobs:    hash -> blobRecord (size, stored_at), one per blob any account
//     holds. It is the set of referenced blobs that gc, check and backup walk
//     (Blobs), and the stored_at a blob read answers as Last-Modified.
//   - holdings: accountID|0x00|hash -> holdingRecord (size, held_at). "Does the
//     caller hold this hash" is one Get (Holds); an account's holdings are one
//     prefix scan that never leaves the account's rows.
//   - usage:    accountID -> bytes held (8 bytes big-endian), kept by holdBlob,
//     so the quota check is one Get however many blobs the account holds.
//   - totals:   "blobs" and "blob_bytes" -> the count and bytes of every
//     recorded blob (each once), kept by holdBlob for the operator's metrics.
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
	// Inline reports a blob whose bytes the store keeps (see inline.go)
	// instead of the blob engine. Set by the store, ignored when passed in.
	Inline bool
	// Data, when passed in, is the blob's bytes for the store to keep
	// inline, in the transaction that records the blob: the caller stored
	// no file. It is ignored when the blob is already recorded (its bytes
	// are kept already, inline or as a file). Never returned filled: read
	// an inline blob's bytes with InlineBlob.
	Data []byte
}

type blobRecord struct {
	Size     int64     `cbor:"1,keyasint"`
	StoredAt time.Time `cbor:"2,keyasint"`
	Inline   bool      `cbor:"3,keyasint,omitempty"`
}

type holdingRecord struct {
	Size   int64     `cbor:"1,keyasint"`
	HeldAt time.Time `cbor:"2,keyasint"`
}

func holdingKey(accountID, hash string) []byte {
	return join(idPart(accountID), []byte(hash))
}

// holds reports whether the account holds the blob.
func holds(tx Tx, accountID, hash string) (bool, error) {
	return has(tx, bucketHoldings, holdingKey(accountID, hash))
}

// usage is the bytes the account holds.
func usage(tx Tx, accountID string) (int64, error) {
	v, err := tx.Bucket(bucketUsage).Get([]byte(accountID))
	if len(v) == 8 {
		return int64(readU64(v)), err
	}
	return 0, err
}

// charge adds size bytes to the account's usage, refusing with
// error.quota.exceeded (and writing nothing) when that would take the
// account past its quota.
func charge(tx Tx, accountID string, size int64) error {
	used, err := usage(tx, accountID)
	if err != nil {
		return err
	}
	if err := checkQuota(tx, accountID, used, size); err != nil {
		return err
	}
	return tx.Bucket(bucketUsage).Put([]byte(accountID), u64(uint64(used+size)))
}

// LimitQuota names an account's quota (the operator's `users set-quota`,
// or the server's --default-quota given at creation) in the refusals it
// makes, so the metrics count them beside the flags' limits.
const LimitQuota = "quota"

// checkQuota refuses storing size more bytes when, with the used bytes the
// account holds and the declared lengths its open transfers have reserved
// (see pendingBytes), that would pass the account's quota: a reserved
// transfer is never refused at its completion because other writes took
// its room meanwhile.
func checkQuota(tx Tx, accountID string, used, size int64) error {
	a, err := getAccount(tx, accountID)
	if err != nil || a.QuotaBytes <= 0 {
		return err
	}
	pending, err := pendingBytes(tx, accountID)
	if err != nil {
		return err
	}
	if used+pending+size > a.QuotaBytes {
		return fault.LimitErrorf(fault.ECodeQuotaExceeded, LimitQuota, 0, "storing %d more bytes would exceed the account's quota of %d bytes (%d in use, %d reserved by open transfers)", size, a.QuotaBytes, used, pending)
	}
	return nil
}

// holdBlob records that the account holds b, creating the blob's record if
// this is the first holding of it, and reports whether the holding is new
// (false: the account already held the blob, and nothing was written). Its
// one refusal, error.quota.exceeded, comes before it writes anything.
func holdBlob(tx Tx, accountID string, b Blob, now time.Time) (bool, error) {
	key := holdingKey(accountID, b.Hash)
	if held, err := has(tx, bucketHoldings, key); held || err != nil {
		return false, err
	}
	if err := charge(tx, accountID, b.Size); err != nil {
		return false, err
	}
	recorded, err := has(tx, bucketBlobs, []byte(b.Hash))
	if err != nil {
		return false, err
	}
	if !recorded {
		rec := blobRecord{Size: b.Size, StoredAt: now, Inline: b.Data != nil}
		if rec.Inline {
			if err := putInline(tx, b); err != nil {
				return false, err
			}
		}
		if err := tx.Bucket(bucketBlobs).Put([]byte(b.Hash), encode(&rec)); err != nil {
			return false, err
		}
		if err := addBlobTotals(tx, b.Hash, 1, b.Size); err != nil {
			return false, err
		}
	}
	if err := tx.Bucket(bucketBlobHolders).Put(holderKey(b.Hash, accountID), member); err != nil {
		return false, err
	}
	return true, tx.Bucket(bucketHoldings).Put(key, encode(&holdingRecord{Size: b.Size, HeldAt: now}))
}

// holderKey is the blob_holders key of the account's holding of hash: the
// hash has a fixed length, so the hash alone is a prefix of its holders.
func holderKey(hash, accountID string) []byte { return join([]byte(hash), []byte(accountID)) }

// releaseBlob ends the account's holding of hash, returning its bytes to
// the account's usage, and reports whether the blob is now held by nobody:
// then its record (and its bytes, when the store kept them inline) goes
// too, and gc removes its file after the grace period. Releasing a blob the
// account does not hold changes nothing.
func releaseBlob(tx Tx, accountID, hash string) (unheld bool, err error) {
	key := holdingKey(accountID, hash)
	rec, err := getRecord[holdingRecord](tx, bucketHoldings, key)
	if err != nil || rec == nil {
		return false, err
	}
	if err := tx.Bucket(bucketHoldings).Delete(key); err != nil {
		return false, err
	}
	if err := tx.Bucket(bucketBlobHolders).Delete(holderKey(hash, accountID)); err != nil {
		return false, err
	}
	used, err := usage(tx, accountID)
	if err != nil {
		return false, err
	}
	if err := tx.Bucket(bucketUsage).Put([]byte(accountID), u64(uint64(max(0, used-rec.Size)))); err != nil {
		return false, err
	}
	others := false
	holders := prefixRange([]byte(hash))
	holders.Limit = 1
	err = tx.Bucket(bucketBlobHolders).Scan(holders, func([]byte, []byte) error {
		others = true
		return nil
	})
	if err != nil || others {
		return false, err
	}
	b, err := getBlob(tx, hash)
	if err != nil || b == nil {
		return false, err
	}
	if b.Inline {
		if err := tx.Bucket(bucketInlineBlobs).Delete([]byte(hash)); err != nil {
			return false, err
		}
	}
	if err := tx.Bucket(bucketBlobs).Delete([]byte(hash)); err != nil {
		return false, err
	}
	return true, addBlobTotals(tx, hash, -1, -b.Size)
}

// getBlob returns nil, nil when the blob is not recorded.
func getBlob(tx Tx, hash string) (*Blob, error) {
	rec, err := getRecord[blobRecord](tx, bucketBlobs, []byte(hash))
	if rec == nil {
		return nil, err
	}
	return &Blob{Hash: hash, Size: rec.Size, StoredAt: rec.StoredAt, Inline: rec.Inline}, nil
}

// Holds reports whether the account holds the blob (uploaded it, or stored
// it through a lifecycle op).
func (s *Store) Holds(accountID, hash string) (bool, error) {
	var ok bool
	err := s.view(func(tx Tx) (err error) {
		ok, err = holds(tx, accountID, hash)
		return err
	})
	return ok, err
}

// ErrBlobNotHeld answers a read of a blob the caller does not hold: one
// answer for a hash nobody stored, another account's blob and a blob the
// caller let go, so a read reveals nothing of other accounts.
var ErrBlobNotHeld = fault.Errorf(fault.ECodeBlobNotFound, "blob not found")

// HeldBlob returns the record of a blob the account holds, in one read
// transaction that ends before the caller opens the blob's bytes, or
// ErrBlobNotHeld.
func (s *Store) HeldBlob(accountID, hash string) (Blob, error) {
	var b *Blob
	var held bool
	err := s.view(func(tx Tx) (err error) {
		b = nil
		if held, err = holds(tx, accountID, hash); err != nil || !held {
			return err
		}
		b, err = getBlob(tx, hash)
		return err
	})
	switch {
	case err != nil:
		return Blob{}, err
	case !held:
		return Blob{}, ErrBlobNotHeld
	case b == nil:
		return Blob{}, fmt.Errorf("kv: account %s holds blob %s, which has no record", accountID, hash)
	}
	return *b, nil
}

// HeldBytes is the bytes of the blobs the account holds (quota, admin
// listings). A blob held by several accounts counts for each of them.
func (s *Store) HeldBytes(accountID string) (int64, error) {
	var total int64
	err := s.view(func(tx Tx) (err error) {
		total, err = usage(tx, accountID)
		return err
	})
	return total, err
}

// QuotaRoom is how many more bytes the account may take for the blob hash,
// known before any byte is read (the room its open transfers reserved is
// not free): math.MaxInt64 when nothing bounds it (an
// unlimited quota, or a blob the account already holds, which costs
// nothing), 0 when the account is at or past its quota. The transaction that
// records a holding checks again, so this is an early answer, not the
// guarantee.
func (s *Store) QuotaRoom(accountID, hash string) (int64, error) {
	var room int64
	err := s.view(func(tx Tx) (err error) {
		room, err = quotaRoom(tx, accountID, hash)
		return err
	})
	return room, err
}

func quotaRoom(tx Tx, accountID, hash string) (int64, error) {
	if held, err := holds(tx, accountID, hash); held || err != nil {
		return math.MaxInt64, err
	}
	a, err := getAccount(tx, accountID)
	if err != nil || a.QuotaBytes <= 0 {
		return math.MaxInt64, err
	}
	used, err := usage(tx, accountID)
	if err != nil {
		return math.MaxInt64, err
	}
	pending, err := pendingBytes(tx, accountID)
	return max(0, a.QuotaBytes-used-pending), err
}

// heldCount counts the blobs the account holds (a prefix scan of its
// holdings; for operator listings).
func heldCount(tx Tx, accountID string) (int, error) {
	n := 0
	err := scanPrefix(tx.Bucket(bucketHoldings), idPart(accountID), func([]byte, []byte) error {
		n++
		return nil
	})
	return n, err
}

// Blobs lists up to limit recorded blobs whose hash sorts after after ("" to
// start), in hash order: every blob some account holds. Callers page through
// it (gc, check, backup) so no read transaction stays open while they touch
// the files.
func (s *Store) Blobs(after string, limit int) ([]Blob, error) {
	var out []Blob
	err := s.view(func(tx Tx) error {
		out = nil
		return tx.Bucket(bucketBlobs).Scan(pageAfter(after, limit), func(k, v []byte) error {
			var rec blobRecord
			if err := decode(v, &rec); err != nil {
				return err
			}
			out = append(out, Blob{Hash: string(k), Size: rec.Size, StoredAt: rec.StoredAt, Inline: rec.Inline})
			return nil
		})
	})
	return out, err
}

// BlobsRecorded reports which of hashes some account holds as a file of
// the blob engine, in one read transaction: garbage collection checks a
// page of blob files at a time (a blob file with no record is garbage once
// it is older than an upload could be). A blob the store keeps inline is
// reported false: a file of it is a leftover (of a move inline cut short,
// or of an upload the store then kept inline), and reads never open it.
// The map has an entry for every hash given.
func (s *Store) BlobsRecorded(hashes []string) (map[string]bool, error) {
	var recorded map[string]bool
	err := s.view(func(tx Tx) error {
		recorded = make(map[string]bool, len(hashes))
		for _, h := range hashes {
			rec, err := getRecord[blobRecord](tx, bucketBlobs, []byte(h))
			if err != nil {
				return err
			}
			recorded[h] = rec != nil && !rec.Inline
		}
		return nil
	})
	return recorded, err
}

// The store-wide blob totals are kept in blobTotalShards rows, the one a
// blob counts in chosen by the first character of its hash, so two writers
// recording different blobs rarely rewrite the same row: one hot row would
// make every pair of concurrent writers conflict on a database that checks
// rows (PostgreSQL), where bbolt's single writer never noticed. BlobTotals
// sums the rows. A row is 16 bytes: the count, then the bytes, big-endian.
const blobTotalShards = 16

// totalsKey is the row of the blob hash (lowercase hex).
func totalsKey(hash string) []byte { return []byte("blobs/" + hash[:1]) }

func addBlobTotals(tx Tx, hash string, count, bytes int64) error {
	b := tx.Bucket(bucketTotals)
	key := totalsKey(hash)
	var cur [2]uint64
	v, err := b.Get(key)
	if err != nil {
		return err
	}
	if len(v) == 16 {
		cur[0], cur[1] = readU64(v[:8]), readU64(v[8:])
	}
	return b.Put(key, append(u64(cur[0]+uint64(count)), u64(cur[1]+uint64(bytes))...))
}

// BlobTotals reports how many blobs the store records and their bytes,
// each blob counted once however many accounts hold it.
func (s *Store) BlobTotals() (count, size int64, err error) {
	err = s.view(func(tx Tx) error {
		count, size = 0, 0
		return scanPrefix(tx.Bucket(bucketTotals), []byte("blobs/"), func(_, v []byte) error {
			if len(v) == 16 {
				count += int64(readU64(v[:8]))
				size += int64(readU64(v[8:]))
			}
			return nil
		})
	})
	return count, size, err
}

// UsageProblems compares every account's recorded usage with the sizes of
// the blobs it holds, as of one read transaction, and describes each
// account whose two differ (at most limit of them). The quota check trusts
// usage alone, so a difference is damage: check reports it.
func (s *Store) UsageProblems(limit int) ([]string, error) {
	var problems []string
	err := s.view(func(tx Tx) error {
		problems = nil
		held := map[string]int64{}
		err := scanPages(tx.Bucket(bucketHoldings), func(k, v []byte) error {
			account, _, ok := bytes.Cut(k, []byte{0})
			if !ok {
				return fmt.Errorf("kv: holding key %q has no account part", k)
			}
			var rec holdingRecord
			if err := decode(v, &rec); err != nil {
				return err
			}
			held[string(account)] += rec.Size
			return nil
		})
		if err != nil {
			return err
		}
		recorded := map[string]int64{}
		err = scanPages(tx.Bucket(bucketUsage), func(k, v []byte) error {
			recorded[string(k)] = int64(readU64(v))
			return nil
		})
		if err != nil {
			return err
		}
		accounts := slices.Concat(slices.Collect(maps.Keys(held)), slices.Collect(maps.Keys(recorded)))
		slices.Sort(accounts)
		for _, account := range slices.Compact(accounts) {
			if held[account] != recorded[account] && len(problems) < limit {
				problems = append(problems, fmt.Sprintf("account %s: usage records %d bytes, its holdings add up to %d",
					account, recorded[account], held[account]))
			}
		}
		return nil
	})
	return problems, err
}
