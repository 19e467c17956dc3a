package kv

import (
	"slices"
	"time"
)

// Bulk writes many records in one transaction: large fixtures for
// benchmarks, and imports. It applies no policy beyond the email index's
// uniqueness: callers hand it records that are already valid.
type Bulk struct {
	tx Tx
	// now is the transaction's one timestamp.
	now time.Time
}

// Bulk runs fn in one write transaction; nothing is written if fn fails.
func (s *Store) Bulk(fn func(*Bulk) error) error {
	return s.update(func(tx Tx) error { return fn(&Bulk{tx: tx, now: s.now()}) })
}

// Account writes a new account and its email index entry.
func (b *Bulk) Account(a *Account) error { return insertAccount(b.tx, a) }

// Session writes a session with its token lookups.
func (b *Bulk) Session(s *Session, access, refresh string) error {
	return putSession(b.tx, s, access, refresh)
}

// Hold records that the account holds b (charging its usage).
func (b *Bulk) Hold(accountID string, blob Blob) error {
	_, err := holdBlob(b.tx, accountID, blob, blob.StoredAt)
	return err
}

// Album provisions an album as ProvisionAlbum does, at the store's now.
func (b *Bulk) Album(accountID, albumID, protocolVersion string) (*Album, error) {
	a, _, err := provisionAlbum(b.tx, b.now, accountID, albumID, protocolVersion)
	return a, err
}

// Op applies a lifecycle op as ApplyOp does, with its checks; a refused op
// fails the bulk write.
func (b *Bulk) Op(accountID string, op *Op) (*OpResult, error) {
	res, refusal, err := applyOp(b.tx, b.now, accountID, op)
	if err == nil {
		err = refusal
	}
	return res, err
}

// Share registers a share link as CreateShare does, with its checks but
// without the per-account caps: a filled library sets its own shape.
func (b *Bulk) Share(opaqueID string, sh *Share) error {
	serves := slices.Sorted(slices.Values(sh.Serves))
	return createShare(b.tx, b.now, opaqueID, sh, serves, shareDigest(sh, serves), ShareLimits{})
}
