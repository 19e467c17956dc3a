package kv

import (
	"bytes"
	"time"

	"sealbox/kv/engine"
	"sealbox/kv/fault"
)

// A transfer is a resumable (tus) upload of one blob inside an upload
// session: the server appends the bytes of many requests to a partial file
// and records here how many of them are durable (the offset) with the
// SHA-256 state after exactly those bytes, so a restart resumes hashing where
// it stopped instead of re-reading gigabytes. A transfer belongs to its
// session: it is refused (error.transfer.not_found) through any other
// session or account, and is deleted with the session (close or expiry).
//
//   - transfers:            transferID -> transferRecord
//   - transfers_by_upload:  uploadKey|transferID -> nothing, so deleting a
//     session finds its transfers by a prefix scan (upload keys are
//     fixed-width SHA-256 sums, so no terminator is needed).
//   - transfers_by_account: accountID|0x00|transferID -> declared length
//     (8 bytes): what the account's open transfers may still add to what it
//     holds, counted and summed for the caps and the quota without reading
//     a record.
//   - transfer_removals:    transferID -> nothing: partial files whose
//     transfer is gone. Files are never touched inside a transaction, so
//     the store queues them and the server deletes them afterwards
//     (TransferRemovals, ForgetTransferRemovals); a crash in between leaves
//     the queue entry, never a forgotten file.

// Transfer is a resumable upload of one declared blob.
type Transfer struct {
	// ID is server-minted; it also names the partial file.
	ID        string
	AccountID string
	// Hash is the content address the client declared; Length its size.
	Hash   string
	Length int64
	// Offset is the number of bytes acknowledged: durable in the partial
	// file. HashState is the SHA-256 state after exactly those bytes (the
	// encoding.BinaryMarshaler form of crypto/sha256's digest); nil at 0.
	Offset    int64
	HashState []byte
	CreatedAt time.Time
}

type transferRecord struct {
	AccountID string    `cbor:"1,keyasint"`
	UploadKey []byte    `cbor:"2,keyasint"`
	Hash      string    `cbor:"3,keyasint"`
	Length    int64     `cbor:"4,keyasint"`
	Offset    int64     `cbor:"5,keyasint"`
	HashState []byte    `cbor:"6,keyasint,omitempty"`
	CreatedAt time.Time `cbor:"7,keyasint"`
}

func getTransfer(tx Tx, id string) (*Transfer, []byte, error) {
	rec, err := getRecord[transferRecord](tx, bucketTransfers, []byte(id))
	if rec == nil {
		return nil, nil, err
	}
	return &Transfer{
		ID: id, AccountID: rec.AccountID, Hash: rec.Hash, Length: rec.Length,
		Offset: rec.Offset, HashState: rec.HashState, CreatedAt: rec.CreatedAt,
	}, rec.UploadKey, nil
}

func putTransfer(tx Tx, uploadKey []byte, t *Transfer) error {
	rec := transferRecord{
		AccountID: t.AccountID, UploadKey: uploadKey, Hash: t.Hash, Length: t.Length,
		Offset: t.Offset, HashState: t.HashState, CreatedAt: t.CreatedAt,
	}
	return tx.Bucket(bucketTransfers).Put([]byte(t.ID), encode(&rec))
}

// deleteTransfer removes a transfer and its index entries and queues its
// partial file for removal.
func deleteTransfer(tx Tx, uploadKey []byte, t *Transfer) error {
	if err := tx.Bucket(bucketTransfers).Delete([]byte(t.ID)); err != nil {
		return err
	}
	if err := tx.Bucket(bucketTransfersByUpload).Delete(join(uploadKey, []byte(t.ID))); err != nil {
		return err
	}
	if err := tx.Bucket(bucketTransfersByAccount).Delete(join(idPart(t.AccountID), []byte(t.ID))); err != nil {
		return err
	}
	return tx.Bucket(bucketTransferRemovals).Put([]byte(t.ID), nil)
}

// deleteUploadTransfers deletes every transfer of the session uploadKey.
func deleteUploadTransfers(tx Tx, uploadKey []byte) error {
	var ids []string
	err := scanPrefix(tx.Bucket(bucketTransfersByUpload), uploadKey, func(k, _ []byte) error {
		ids = append(ids, string(k[len(uploadKey):]))
		return nil
	})
	if err != nil {
		return err
	}
	for _, id := range ids {
		t, _, err := getTransfer(tx, id)
		if err != nil {
			return err
		}
		if t == nil {
			continue
		}
		if err := deleteTransfer(tx, uploadKey, t); err != nil {
			return err
		}
	}
	return nil
}

// liveTransfer returns the transfer id of the account's open session named
// by uploadKey, with the session. Unknown, expired, another session's and
// another account's transfers are indistinguishable: error.transfer.not_found
// (or error.upload.not_found when the session itself is not live).
func liveTransfer(tx Tx, accountID string, uploadKey []byte, id string, now time.Time) (*Upload, *Transfer, error) {
	u, err := liveUpload(tx, accountID, uploadKey, now)
	if err != nil {
		return nil, nil, err
	}
	t, key, err := getTransfer(tx, id)
	if err != nil {
		return nil, nil, err
	}
	if t == nil || t.AccountID != accountID || !bytes.Equal(key, uploadKey) {
		return nil, nil, fault.Errorf(fault.ECodeTransferNotFound, "transfer not found")
	}
	return u, t, nil
}

// pendingBytes sums the declared lengths of the account's open transfers.
func pendingBytes(tx Tx, accountID string) (int64, error) {
	_, total, err := openTransfers(tx, accountID)
	return total, err
}

// openTransfers counts the account's open transfers and sums their declared
// lengths, from its own rows of transfers_by_account.
func openTransfers(tx Tx, accountID string) (n int, total int64, err error) {
	err = scanPrefix(tx.Bucket(bucketTransfersByAccount), idPart(accountID), func(_, v []byte) error {
		n++
		total += int64(readU64(v))
		return nil
	})
	return n, total, err
}

// TransferLimits caps what one account's open transfers may hold; 0 is no
// cap.
type TransferLimits struct {
	// MaxOpen is how many transfers an account may have open at once.
	MaxOpen int
	// MaxPendingBytes bounds the declared lengths of an account's open
	// transfers together, whatever its quota: disk the transfers may still
	// claim.
	MaxPendingBytes int64
}

// check refuses a transfer of length more to an account whose open
// transfers number n and declare total bytes. Open transfers end when they
// complete or their session expires, idle after its last write: the wait
// the refusal names.
func (l TransferLimits) check(n int, total, length int64, idle time.Duration) error {
	if l.MaxOpen > 0 && n >= l.MaxOpen {
		return fault.LimitErrorf(fault.ECodeLimitTransfers, "max-transfers", idle,
			"the account has %d open transfers, the most it may have; finish or delete one first", n)
	}
	if l.MaxPendingBytes > 0 && total+length > l.MaxPendingBytes {
		return fault.LimitErrorf(fault.ECodeLimitPendingBytes, "max-pending-bytes", idle,
			"the account's open transfers declare %d bytes; %d more would pass the most they may declare together, %d", total, length, l.MaxPendingBytes)
	}
	return nil
}

// CreateTransfer records a new transfer t (ID, Hash and Length set by the
// caller) in the account's open session named by uploadToken, and moves the
// session's expiry to now+idle. The account's quota (0: unlimited) must cover
// what it holds, the declared lengths of its other open transfers (counted
// whole, conservatively) and t.Length, else error.quota.exceeded; the
// account's open transfers must stay within lim, else error.limit.transfers
// or error.limit.pending_bytes (counted in this transaction, so parallel
// creations, on any node, cannot together pass them). Nothing is recorded
// on a refusal. An unknown, expired or foreign session is
// error.upload.not_found. Concurrent writes to sessions are committed
// together, as AddUploadBlob's are.
func (s *Store) CreateTransfer(accountID, uploadToken string, t *Transfer, idle time.Duration, lim TransferLimits) error {
	key := HashToken(uploadToken)
	return s.commitBatched(uploadReads(accountID, key, ""), func(tx Tx) (refusal, err error) {
		now := s.now()
		u, err := liveUpload(tx, accountID, key, now)
		if err != nil {
			return asRefusal(err)
		}
		n, pending, err := openTransfers(tx, accountID)
		if err != nil {
			return nil, err
		}
		if err := lim.check(n, pending, t.Length, idle); err != nil {
			return err, nil
		}
		// The quota counts held bytes plus every open transfer's full length
		// (checkQuota adds them): conservative, so parallel transfers cannot
		// together pass it.
		used, err := usage(tx, accountID)
		if err != nil {
			return nil, err
		}
		if err := checkQuota(tx, accountID, used, t.Length); err != nil {
			return asRefusal(err)
		}
		t.AccountID, t.Offset, t.HashState, t.CreatedAt = accountID, 0, nil, now
		if err := putTransfer(tx, key, t); err != nil {
			return nil, err
		}
		if err := tx.Bucket(bucketTransfersByUpload).Put(join(key, []byte(t.ID)), nil); err != nil {
			return nil, err
		}
		if err := tx.Bucket(bucketTransfersByAccount).Put(join(idPart(accountID), []byte(t.ID)), u64(uint64(t.Length))); err != nil {
			return nil, err
		}
		return nil, touchUpload(tx, key, u, now, idle)
	})
}

// transferReads lists the keys a write to transfer id of the upload session
// uploadKey under fence reads, for commitBatched.
func transferReads(accountID string, uploadKey []byte, id string, fence Fence) func() []engine.Key {
	return func() []engine.Key {
		return append(uploadReads(accountID, uploadKey, "")(),
			engine.Key{Bucket: bucketTransfers, Key: []byte(id)},
			engine.Key{Bucket: bucketLeases, Key: []byte(fence.Lease)})
	}
}

// Transfer returns the transfer id of the account's open session named by
// uploadToken, or error.transfer.not_found / error.upload.not_found.
func (s *Store) Transfer(accountID, uploadToken, id string) (*Transfer, error) {
	var t *Transfer
	err := s.view(func(tx Tx) (err error) {
		_, t, err = liveTransfer(tx, accountID, HashToken(uploadToken), id, s.now())
		return err
	})
	return t, err
}

// fencedTransfer is liveTransfer for a writer that must hold the transfer's
// lease (fence): when its holder no longer holds it live, the write is
// refused with error.transfer.locked, whose Retry-After is the time left on
// the lease of whoever holds it now (a second when none does).
func fencedTransfer(tx Tx, accountID string, uploadKey []byte, id string, fence Fence, now time.Time) (*Upload, *Transfer, error) {
	u, t, err := liveTransfer(tx, accountID, uploadKey, id, now)
	if err != nil {
		return nil, nil, err
	}
	held, until, err := heldBy(tx, fence.Lease, fence.Holder, now)
	if err != nil {
		return nil, nil, err
	}
	if !held {
		retry := time.Second
		if !until.IsZero() {
			retry = max(until.Sub(now), time.Second)
		}
		return nil, nil, &fault.Error{Code: fault.ECodeTransferLocked, RetryAfter: retry,
			Message: "this request lost its claim on the transfer; retry from the offset HEAD gives"}
	}
	return u, t, nil
}

// AdvanceTransfer acknowledges bytes from..to of the transfer: the caller has
// made them durable in the partial file, and state is the SHA-256 state after
// byte to. It moves the session's expiry to now+idle, as any write to the
// session does. The caller must hold the transfer's lease named by fence
// (error.transfer.locked otherwise: another writer may own the transfer
// now). The offset must still be from (error.transfer.offset_mismatch
// otherwise: another request moved it), and to must not pass the length.
// Concurrent writes to sessions are committed together, as AddUploadBlob's
// are.
func (s *Store) AdvanceTransfer(accountID, uploadToken, id string, fence Fence, from, to int64, state []byte, idle time.Duration) error {
	key := HashToken(uploadToken)
	return s.commitBatched(transferReads(accountID, key, id, fence), func(tx Tx) (refusal, err error) {
		now := s.now()
		u, t, err := fencedTransfer(tx, accountID, key, id, fence, now)
		if err != nil {
			return asRefusal(err)
		}
		if t.Offset != from || to < from || to > t.Length {
			return fault.Errorf(fault.ECodeOffsetMismatch, "the transfer is at offset %d", t.Offset), nil
		}
		t.Offset, t.HashState = to, state
		if err := putTransfer(tx, key, t); err != nil {
			return nil, err
		}
		return nil, touchUpload(tx, key, u, now, idle)
	})
}

// CompleteTransfer ends the transfer whose last bytes, from offset from to
// its length, the caller has made durable and whose blob it has verified and
// placed in the blob store: the transfer is deleted (its partial file queued
// for removal), and, as AddUploadBlob does, the account holds the blob, the
// session's hash set gains it and its expiry moves to now+idle. newlyHeld is
// false when the account already held the blob. The caller must hold the
// transfer's lease named by fence, else error.transfer.locked; the offset
// must still be from, else error.transfer.offset_mismatch. Concurrent
// writes to sessions are committed together, as AddUploadBlob's are.
func (s *Store) CompleteTransfer(accountID, uploadToken, id string, fence Fence, from int64, idle time.Duration) (newlyHeld bool, err error) {
	key := HashToken(uploadToken)
	err = s.commitBatched(transferReads(accountID, key, id, fence), func(tx Tx) (refusal, err error) {
		newlyHeld = false
		now := s.now()
		u, t, err := fencedTransfer(tx, accountID, key, id, fence, now)
		if err != nil {
			return asRefusal(err)
		}
		if t.Offset != from {
			return fault.Errorf(fault.ECodeOffsetMismatch, "the transfer is at offset %d", t.Offset), nil
		}
		// The blob's keys, known now, in one exchange.
		if err := prefetch(tx, uploadReads(accountID, key, t.Hash)); err != nil {
			return nil, err
		}
		if err := deleteTransfer(tx, key, t); err != nil {
			return nil, err
		}
		// A refusal here (the quota, lowered since the transfer reserved
		// its room) comes after the delete: it is returned as an error, so
		// the batch runs again without this call, which runs alone and is
		// rolled back whole.
		held, err := holdBlob(tx, accountID, Blob{Hash: t.Hash, Size: t.Length}, now)
		if err != nil {
			return nil, err
		}
		if err := tx.Bucket(bucketUploadBlobs).Put(join(key, []byte(t.Hash)), nil); err != nil {
			return nil, err
		}
		newlyHeld = held
		return nil, touchUpload(tx, key, u, now, idle)
	})
	return newlyHeld, err
}

// DiscardTransfer deletes the transfer (termination, or a blob that did not
// hash to its declared address) and queues its partial file for removal.
func (s *Store) DiscardTransfer(accountID, uploadToken, id string) error {
	return s.update(func(tx Tx) error {
		key := HashToken(uploadToken)
		_, t, err := liveTransfer(tx, accountID, key, id, s.now())
		if err != nil {
			return err
		}
		return deleteTransfer(tx, key, t)
	})
}

// TransferRemovals lists up to limit ids of deleted transfers whose partial
// files are still to be removed.
func (s *Store) TransferRemovals(limit int) ([]string, error) {
	var ids []string
	err := s.view(func(tx Tx) error {
		ids = nil
		return tx.Bucket(bucketTransferRemovals).Scan(Range{Limit: limit}, func(k, _ []byte) error {
			ids = append(ids, string(k))
			return nil
		})
	})
	return ids, err
}

// ForgetTransferRemovals drops ids from the removal queue once their partial
// files are gone. It may be called more than once for an id.
func (s *Store) ForgetTransferRemovals(ids []string) error {
	return s.update(func(tx Tx) error {
		for _, id := range ids {
			if err := tx.Bucket(bucketTransferRemovals).Delete([]byte(id)); err != nil {
				return err
			}
		}
		return nil
	})
}

// Transfers lists up to limit ids of recorded transfers whose id sorts after
// after ("" to start), in id order: the partial files to keep. A garbage
// collector pages through it and may delete any other partial file last
// written before its listing began (a newer one may belong to a transfer
// created meanwhile).
func (s *Store) Transfers(after string, limit int) ([]string, error) {
	var ids []string
	err := s.view(func(tx Tx) error {
		ids = nil
		return tx.Bucket(bucketTransfers).Scan(pageAfter(after, limit), func(k, _ []byte) error {
			ids = append(ids, string(k))
			return nil
		})
	})
	return ids, err
}
