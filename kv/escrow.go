package kv

import (
	"time"

	"sealbox/kv/fault"
)

// Escrow is an account's wrapped master key: opaque bytes the server keeps
// and returns exactly, never reads.
type Escrow struct {
	Bytes    []byte
	StoredAt time.Time
}

type escrowRecord struct {
	Bytes    []byte    `cbor:"1,keyasint"`
	StoredAt time.Time `cbor:"2,keyasint"`
}

// PutEscrow stores b as the account's escrow, displacing any earlier one in
// the same transaction, and reports when it was stored and whether an earlier
// escrow was replaced.
func (s *Store) PutEscrow(accountID string, b []byte) (storedAt time.Time, replaced bool, err error) {
	err = s.update(func(tx Tx) error {
		bucket := tx.Bucket(bucketEscrow)
		storedAt = s.now()
		held, err := bucket.Get([]byte(accountID))
		if err != nil {
			return err
		}
		replaced = held != nil
		return bucket.Put([]byte(accountID), encode(&escrowRecord{Bytes: b, StoredAt: storedAt}))
	})
	return storedAt, replaced, err
}

// Escrow returns the account's escrow, or error.escrow.not_found.
func (s *Store) Escrow(accountID string) (*Escrow, error) {
	var e *Escrow
	err := s.view(func(tx Tx) error {
		rec, err := getRecord[escrowRecord](tx, bucketEscrow, []byte(accountID))
		if err != nil {
			return err
		}
		if rec == nil {
			return fault.Errorf(fault.ECodeEscrowNotFound, "no escrow is stored for this account")
		}
		e = &Escrow{Bytes: rec.Bytes, StoredAt: rec.StoredAt}
		return nil
	})
	return e, err
}
