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
	// NextPublish is the publish limit's state (PublishLimit.admit): the
	// record is rewritten by every publish anyway, so the limit costs no
	// row of its own.
	NextPublish time.Time `cbor:"6,keyasint,omitempty"`
}

// PublishLimit bounds an account's accepted directory publishes, and so
// its growth of the transparency log, which never shrinks: Burst at once,
// then one per Interval. A zero Burst is no limit.
type PublishLimit struct {
	Interval time.Duration
	Burst    int
}

// LimitDirectoryPublishes is the flag name a publish refusal is counted
// under.
const LimitDirectoryPublishes = "directory-publishes"

// admit is the generic cell rate algorithm over one timestamp: next is the
// instant the account's publishes have caught up with (in the past when
// idle). A publish is admitted while next lies less than Burst-1 intervals
// ahead of now, and moves next one interval on; otherwise wait is how long
// until it would be admitted.
func (l PublishLimit) admit(next, now time.Time) (after time.Time, wait time.Duration) {
	if l.Burst <= 0 {
		return next, 0
	}
	if next.Before(now) {
		next = now
	}
	if wait := next.Sub(now) - time.Duration(l.Burst-1)*l.Interval; wait > 0 {
		return next, wait
	}
	return next.Add(l.Interval), 0
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
// exactly the publishes that were stored, and sets d.LogIndex. A publish
// that would pass lim is refused last, after the checks above, so only
// publishes that would be stored count against it.
func (s *Store) PublishDirectory(accountID string, d *Directory, lim PublishLimit) error {
	return s.update(func(tx Tx) error {
		now := s.now()
		old, err := getDirectory(tx, accountID)
		if err != nil {
			return err
		}
		var next time.Time
		if old != nil {
			next = old.NextPublish
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
		next, wait := lim.admit(next, now)
		if wait > 0 {
			return fault.LimitErrorf(fault.ECodeLimitDirectoryPublishes, LimitDirectoryPublishes, wait,
				"the account may publish its directory %d times at once, then once every %s", lim.Burst, lim.Interval)
		}
		d.PublishedAt = now
		index, err := appendLog(tx, DirectoryLogRecord(accountID, d.Version, d.Bytes, d.IdentityKey))
		if err != nil {
			return err
		}
		d.LogIndex = index
		rec := directoryRecord{Version: d.Version, Bytes: d.Bytes, IdentityKey: d.IdentityKey, PublishedAt: now, LogIndex: index, NextPublish: next}
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

// DirectoryReset is what ResetDirectory did.
type DirectoryReset struct {
	AccountID string
	// Cleared is false when the account had no directory: nothing was
	// unpinned and the log is unchanged.
	Cleared bool
	// LogIndex is the index of the reset's record in the log, when Cleared.
	LogIndex int64
	// RevokedSessions counts the sessions closed.
	RevokedSessions int
}

// ResetDirectory is the operator's undo of a pinned identity key (one a
// token thief may have pinned, or one the owner lost): in one transaction it
// closes every session of the account registered under email and deletes
// its directory, pinned key and version with it, and appends
// DirectoryResetLogRecord to the transparency log, which keeps every
// earlier record. The account's next publish pins its key as a first
// publish does, at any version from 1, so a thief's maximum version no
// longer locks the owner out. An account without a directory only has its
// sessions closed.
func (s *Store) ResetDirectory(email string) (DirectoryReset, error) {
	var r DirectoryReset
	err := s.update(func(tx Tx) error {
		r = DirectoryReset{}
		a, err := mustAccountByEmail(tx, email)
		if err != nil {
			return err
		}
		r.AccountID = a.ID
		if r.RevokedSessions, err = deleteAccountSessions(tx, a.ID, ""); err != nil {
			return err
		}
		old, err := getDirectory(tx, a.ID)
		if err != nil || old == nil {
			return err
		}
		if r.LogIndex, err = appendLog(tx, DirectoryResetLogRecord(a.ID, old.Version, old.IdentityKey)); err != nil {
			return err
		}
		r.Cleared = true
		return tx.Bucket(bucketDirectories).Delete([]byte(a.ID))
	})
	return r, err
}
