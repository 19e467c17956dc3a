package kv

import (
	"bytes"
	"time"

	"sealbox/kv/fault"
)

// Directory is an account's signed device directory: Bytes exactly as the
// owner signed them, the directory_version read from them, and the identity
// public key pinned by the account's first publish.
type Directory struct {
	Version     uint64
	Bytes       []byte
	IdentityKey []byte
	PublishedAt time.Time
	// LogIndex is the index of the publish's record in the transparency
	// log (DirectoryLogRecord).
	LogIndex int64
}

type directoryRecord struct {
	Version     uint64    `cbor:"1,keyasint"`
	Bytes       []byte    `cbor:"2,keyasint"`
	IdentityKey []byte    `cbor:"3,keyasint"`
	PublishedAt time.Time `cbor:"4,keyasint"`
	LogIndex    int64     `cbor:"5,keyasint"`
}

func getDirectory(tx Tx, accountID string) (*directoryRecord, error) {
	return getRecord[directoryRecord](tx, bucketDirectories, []byte(accountID))
}

// PublishDirectory stores d for the account when its version is above the
// stored one. The comparison and the write are one transaction, so of two
// concurrent publishes of one version exactly one succeeds. The first
// publish pins d.IdentityKey; a later one with another key is refused with
// error.directory.identity_key_mismatch before the version is looked
// at, so a stolen access token cannot swap the key global sign-out checks.
// A version not above the stored one is error.directory.version_conflict
// with the submitted and stored versions as details. A publish appends its
// record to the transparency log in the same transaction, so the log holds
// exactly the publishes that were stored, and sets d.LogIndex.
func (s *Store) PublishDirectory(accountID string, d *Directory) error {
	return s.update(func(tx Tx) error {
		old, err := getDirectory(tx, accountID)
		if err != nil {
			return err
		}
		if old != nil {
			if !bytes.Equal(old.IdentityKey, d.IdentityKey) {
				return fault.Errorf(fault.ECodeIdentityKeyMismatch, "the identity key differs from the one pinned by the account's first directory")
			}
			if d.Version <= old.Version {
				return &fault.Error{
					Code:    fault.ECodeDirectoryVersionConflict,
					Message: "directory_version must be above the stored version; re-sign above it",
					Details: map[string]any{"submitted": d.Version, "stored": old.Version},
				}
			}
		}
		d.PublishedAt = s.now()
		index, err := appendLog(tx, DirectoryLogRecord(accountID, d.Version, d.Bytes, d.IdentityKey))
		if err != nil {
			return err
		}
		d.LogIndex = index
		rec := directoryRecord{Version: d.Version, Bytes: d.Bytes, IdentityKey: d.IdentityKey, PublishedAt: d.PublishedAt, LogIndex: index}
		return tx.Bucket(bucketDirectories).Put([]byte(accountID), encode(&rec))
	})
}

// Directory returns the account's directory and pinned key, or
// error.directory.not_found for an unknown account and for an account that
// has not published one (the two are indistinguishable).
func (s *Store) Directory(accountID string) (*Directory, error) {
	var d *Directory
	err := s.view(func(tx Tx) error {
		rec, err := getDirectory(tx, accountID)
		if err != nil {
			return err
		}
		if rec == nil {
			return fault.Errorf(fault.ECodeDirectoryNotFound, "no directory is published for this account")
		}
		d = &Directory{Version: rec.Version, Bytes: rec.Bytes, IdentityKey: rec.IdentityKey, PublishedAt: rec.PublishedAt, LogIndex: rec.LogIndex}
		return nil
	})
	return d, err
}
