package kv

import (
	"bytes"
	"time"

	"sealbox/kv/engine"
	"sealbox/kv/fault"
)

// An upload session lets one account put blobs for one of its albums. Its
// id is a bearer token known to the store only by its SHA-256 (the "key"
// below). It is open until closed or until it has been idle for the idle
// time the caller passes: every stored blob moves its expiry.
//
//   - uploads:          key -> uploadRecord
//   - uploads_by_album: albumID|0x00|key -> expires_at (8 bytes), so the count
//     of an album's open sessions (InFlight) is a prefix scan that reads no
//     record.
//   - uploads_by_account: accountID|0x00|key -> expires_at (8 bytes), so the
//     cap on an account's open sessions is checked by a prefix scan of its
//     own rows, inside the transaction that opens one: no row that every
//     writer rewrites, and no two openings that together pass the cap.
//   - upload_blobs:     key|hash -> member: the hashes the session stored,
//     which integrity checks verify against the blob store.

// Upload is an open upload session.
type Upload struct {
	AccountID string
	AlbumID   string
	CreatedAt time.Time
	ExpiresAt time.Time
}

type uploadRecord struct {
	AccountID string    `cbor:"1,keyasint"`
	AlbumID   string    `cbor:"2,keyasint"`
	CreatedAt time.Time `cbor:"3,keyasint"`
	ExpiresAt time.Time `cbor:"4,keyasint"`
}

func uploadAlbumKey(albumID string, key []byte) []byte {
	return join(idPart(albumID), key)
}

func uploadAccountKey(accountID string, key []byte) []byte {
	return join(idPart(accountID), key)
}

// getUpload returns nil, nil when no session has the key.
func getUpload(tx Tx, key []byte) (*Upload, error) {
	rec, err := getRecord[uploadRecord](tx, bucketUploads, key)
	if rec == nil {
		return nil, err
	}
	return (*Upload)(rec), nil
}

func putUpload(tx Tx, key []byte, u *Upload) error {
	if err := tx.Bucket(bucketUploads).Put(key, encode(uploadRecord(*u))); err != nil {
		return err
	}
	if err := tx.Bucket(bucketUploadsByAlbum).Put(uploadAlbumKey(u.AlbumID, key), timeKey(u.ExpiresAt)); err != nil {
		return err
	}
	if err := tx.Bucket(bucketUploadsByAccount).Put(uploadAccountKey(u.AccountID, key), timeKey(u.ExpiresAt)); err != nil {
		return err
	}
	return putExpiry(tx, u.ExpiresAt, kindUpload, key)
}

// liveUpload returns the session the token names when it is the account's
// and open at now, else error.upload.not_found: unknown, expired, closed and
// another account's sessions are indistinguishable.
func liveUpload(tx Tx, accountID string, key []byte, now time.Time) (*Upload, error) {
	u, err := getUpload(tx, key)
	if err != nil {
		return nil, err
	}
	if u == nil || u.AccountID != accountID || !now.Before(u.ExpiresAt) {
		return nil, fault.Errorf(fault.ECodeUploadNotFound, "upload session not found")
	}
	return u, nil
}

// touchUpload moves the session's expiry to now+idle: every write to a
// session keeps it open.
func touchUpload(tx Tx, key []byte, u *Upload, now time.Time, idle time.Duration) error {
	if err := deleteExpiry(tx, u.ExpiresAt, kindUpload, key); err != nil {
		return err
	}
	u.ExpiresAt = Deadline(now, idle)
	return putUpload(tx, key, u)
}

// deleteUpload removes a session, its album index entry, its expiry entry,
// its record of stored hashes and its unfinished transfers. The blobs stay
// held by the account.
func deleteUpload(tx Tx, key []byte, u *Upload) error {
	if err := deleteUploadTransfers(tx, key); err != nil {
		return err
	}
	if err := tx.Bucket(bucketUploads).Delete(key); err != nil {
		return err
	}
	if err := tx.Bucket(bucketUploadsByAlbum).Delete(uploadAlbumKey(u.AlbumID, key)); err != nil {
		return err
	}
	if err := tx.Bucket(bucketUploadsByAccount).Delete(uploadAccountKey(u.AccountID, key)); err != nil {
		return err
	}
	if err := deleteExpiry(tx, u.ExpiresAt, kindUpload, key); err != nil {
		return err
	}
	return deletePrefix(tx.Bucket(bucketUploadBlobs), key)
}

// OpenUpload opens an upload session named by token for the account's
// album, expiring after idle. An album that does not exist or is another
// account's is error.album.not_found; an album with a protocol upgrade in
// flight is error.album.upgrade_in_flight; an account that already has
// maxOpen open sessions (0: no cap) is error.limit.upload_sessions, with
// the wait until the first of them expires.
func (s *Store) OpenUpload(accountID, albumID, token string, idle time.Duration, maxOpen int) (*Upload, error) {
	var u *Upload
	err := s.update(func(tx Tx) error {
		now := s.now()
		a, err := getAlbum(tx, albumID)
		if err != nil {
			return err
		}
		if a == nil || a.OwnerID != accountID {
			return fault.Errorf(fault.ECodeAlbumNotFound, "album not found")
		}
		if a.deleted() {
			return albumDeleted()
		}
		// A protocol upgrade waits for in_flight to reach zero: a new
		// session would move the count away from it.
		if up, err := liveUpgrade(tx, albumID, now); err != nil {
			return err
		} else if up != nil {
			return fault.Errorf(fault.ECodeUpgradeInFlight, "a protocol upgrade of the album is in flight; no upload session opens until it ends")
		}
		if err := checkOpenUploads(tx, accountID, now, maxOpen); err != nil {
			return err
		}
		u = &Upload{AccountID: accountID, AlbumID: albumID, CreatedAt: now, ExpiresAt: Deadline(now, idle)}
		return putUpload(tx, HashToken(token), u)
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}

// Upload returns the account's open session named by token, or
// error.upload.not_found.
func (s *Store) Upload(accountID, token string) (*Upload, error) {
	var u *Upload
	err := s.view(func(tx Tx) (err error) {
		u, err = liveUpload(tx, accountID, HashToken(token), s.now())
		return err
	})
	return u, err
}

// AddUploadBlob records that the session named by token stored b: the
// account holds b, the session's hash set gains it, and the session's expiry
// moves to now+idle. It re-checks that the session is still the account's and
// open (it may have closed or expired while the bytes streamed), answering
// error.upload.not_found otherwise. newlyHeld is false when the account
// already held b.
//
// Concurrent uploads are committed together (commitBatched): every upload
// of a session rewrites the session's record and index rows, and every
// upload of an account its usage, so on a database that checks rows
// (PostgreSQL) concurrent uploads in transactions of their own would all
// but one lose and retry.
func (s *Store) AddUploadBlob(accountID, token string, b Blob, idle time.Duration) (newlyHeld bool, err error) {
	key := HashToken(token)
	err = s.commitBatched(uploadReads(accountID, key, b.Hash), func(tx Tx) (refusal, err error) {
		newlyHeld = false
		now := s.now()
		u, err := liveUpload(tx, accountID, key, now)
		if err != nil {
			return asRefusal(err)
		}
		// holdBlob writes nothing before it refuses.
		held, err := holdBlob(tx, accountID, b, now)
		if err != nil {
			return asRefusal(err)
		}
		if err := tx.Bucket(bucketUploadBlobs).Put(join(key, []byte(b.Hash)), member); err != nil {
			return nil, err
		}
		newlyHeld = held
		return nil, touchUpload(tx, key, u, now, idle)
	})
	return newlyHeld, err
}

// uploadReads lists the keys a write to the upload session uploadKey that
// stores blob hash (none: "") reads, for commitBatched.
func uploadReads(accountID string, uploadKey []byte, hash string) func() []engine.Key {
	return func() []engine.Key {
		keys := []engine.Key{
			{Bucket: bucketUploads, Key: uploadKey},
			{Bucket: bucketUsage, Key: []byte(accountID)},
			{Bucket: bucketAccounts, Key: []byte(accountID)},
		}
		if hash != "" {
			keys = append(keys,
				engine.Key{Bucket: bucketHoldings, Key: holdingKey(accountID, hash)},
				engine.Key{Bucket: bucketBlobs, Key: []byte(hash)},
				engine.Key{Bucket: bucketTotals, Key: totalsKey(hash)})
		}
		return keys
	}
}

// UploadRoom is Upload and QuotaRoom in one read transaction, whose keys
// are read in one exchange on PostgreSQL: what a blob PUT checks before it
// reads its body. It answers error.upload.not_found for a session that is
// not the account's and open.
func (s *Store) UploadRoom(accountID, token, hash string) (room int64, err error) {
	key := HashToken(token)
	err = s.view(func(tx Tx) error {
		if err := prefetch(tx, uploadReads(accountID, key, hash)); err != nil {
			return err
		}
		if _, err := liveUpload(tx, accountID, key, s.now()); err != nil {
			return err
		}
		room, err = quotaRoom(tx, accountID, hash)
		return err
	})
	return room, err
}

// UploadBlobs lists, in hash order, the hashes the account's open session
// named by token has stored, or error.upload.not_found.
func (s *Store) UploadBlobs(accountID, token string) ([]string, error) {
	var out []string
	err := s.view(func(tx Tx) error {
		key := HashToken(token)
		if _, err := liveUpload(tx, accountID, key, s.now()); err != nil {
			return err
		}
		return scanPrefix(tx.Bucket(bucketUploadBlobs), key, func(k, _ []byte) error {
			out = append(out, string(k[len(key):]))
			return nil
		})
	})
	return out, err
}

// CloseUpload closes the account's open session named by token, or answers
// error.upload.not_found. The blobs it stored stay held; its unfinished
// transfers are discarded.
func (s *Store) CloseUpload(accountID, token string) error {
	return s.update(func(tx Tx) error {
		key := HashToken(token)
		u, err := liveUpload(tx, accountID, key, s.now())
		if err != nil {
			return err
		}
		return deleteUpload(tx, key, u)
	})
}

// InFlight counts the album's open, unexpired upload sessions: the number the
// upgrade ceremony waits to see reach zero. It reads only the album's rows of
// the index, never a session record.
func (s *Store) InFlight(albumID string) (int, error) {
	n := 0
	err := s.view(func(tx Tx) (err error) {
		n, err = inFlight(tx, albumID, s.now())
		return err
	})
	return n, err
}

func inFlight(tx Tx, albumID string, now time.Time) (int, error) {
	n := 0
	limit := timeKey(now)
	err := scanPrefix(tx.Bucket(bucketUploadsByAlbum), idPart(albumID), func(_, v []byte) error {
		if bytes.Compare(v, limit) > 0 {
			n++
		}
		return nil
	})
	return n, err
}

// checkOpenUploads refuses a new session to an account that has maxOpen
// open ones (0: no cap), counted from its rows of uploads_by_account: a
// session past its expiry no longer counts, even before the sweep deletes
// it.
func checkOpenUploads(tx Tx, accountID string, now time.Time, maxOpen int) error {
	if maxOpen <= 0 {
		return nil
	}
	n, first := 0, time.Time{}
	err := scanPrefix(tx.Bucket(bucketUploadsByAccount), idPart(accountID), func(_, v []byte) error {
		at := time.Unix(0, int64(readU64(v)))
		if now.Before(at) {
			n++
			if first.IsZero() || at.Before(first) {
				first = at
			}
		}
		return nil
	})
	if err != nil || n < maxOpen {
		return err
	}
	return fault.LimitErrorf(fault.ECodeLimitUploadSessions, "max-upload-sessions", first.Sub(now),
		"the account has %d open upload sessions, the most it may have; close one or wait for one to expire", n)
}
