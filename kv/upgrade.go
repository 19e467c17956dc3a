package kv

import (
	"time"

	"sealbox/kv/fault"
)

// The protocol-upgrade ceremony moves an album to a newer protocol through
// quiescence: start (a target and a window), wait for in_flight (the album's
// open upload sessions, which cannot grow meanwhile) to reach zero, commit
// (re-pin, keep the tombstone); abort or the window's end return the album to
// normal operation.
//
//   - upgrades:   albumID -> upgradeRecord, the ceremony in flight, with an
//     expiry index entry so the sweeper frees the album. Reads check the
//     window themselves: an expired ceremony is normal operation at once.
//     Kept apart from the album record, which every op rewrites, because the
//     intent may be large.
//   - tombstones: albumID|0x00|intentID -> tombstoneRecord, each committed
//     ceremony, with its intent and tombstone bytes as sent.

// Upgrade is a ceremony in flight.
type Upgrade struct {
	IntentID          string
	ToProtocolVersion string
	ExpiresAt         time.Time
	// Intent is the ceremony's intent, kept byte for byte as given.
	Intent []byte
}

type upgradeRecord struct {
	IntentID          string    `cbor:"1,keyasint"`
	ToProtocolVersion string    `cbor:"2,keyasint"`
	ExpiresAt         time.Time `cbor:"3,keyasint"`
	Intent            []byte    `cbor:"4,keyasint"`
}

type tombstoneRecord struct {
	FromProtocolVersion string    `cbor:"1,keyasint"`
	ToProtocolVersion   string    `cbor:"2,keyasint"`
	Intent              []byte    `cbor:"3,keyasint"`
	Tombstone           []byte    `cbor:"4,keyasint"`
	CommittedAt         time.Time `cbor:"5,keyasint"`
}

// Phase is an album's upgrade phase.
type Phase struct {
	AlbumID string
	// Upgrade is the ceremony in flight; nil in normal operation.
	Upgrade *Upgrade
	// InFlight counts the album's open upload sessions.
	InFlight int
}

// liveUpgrade returns the album's ceremony when one is in flight at now,
// else nil.
func liveUpgrade(tx Tx, albumID string, now time.Time) (*Upgrade, error) {
	rec, err := getRecord[upgradeRecord](tx, bucketUpgrades, []byte(albumID))
	if rec == nil || err != nil || reached(rec.ExpiresAt, now) {
		return nil, err
	}
	return (*Upgrade)(rec), nil
}

// deleteUpgrade removes the album's ceremony record, live or expired, and its
// expiry entry.
func deleteUpgrade(tx Tx, albumID string) error {
	rec, err := getRecord[upgradeRecord](tx, bucketUpgrades, []byte(albumID))
	if rec == nil || err != nil {
		return err
	}
	if err := deleteExpiry(tx, rec.ExpiresAt, kindUpgrade, []byte(albumID)); err != nil {
		return err
	}
	return tx.Bucket(bucketUpgrades).Delete([]byte(albumID))
}

// upgradeAlbum returns the account's album; one that does not exist or is
// another account's is error.album.not_found at every step of the ceremony.
func upgradeAlbum(tx Tx, accountID, albumID string) (*Album, error) {
	a, err := getAlbum(tx, albumID)
	if err != nil {
		return nil, err
	}
	if a == nil || a.OwnerID != accountID {
		return nil, fault.Errorf(fault.ECodeAlbumNotFound, "album not found")
	}
	return a, nil
}

// liveCeremony returns the account's album and its ceremony when intentID
// is the one in flight; no ceremony, or another one, is
// error.album.upgrade_in_flight: only the live intent id may end it.
func liveCeremony(tx Tx, accountID, albumID, intentID string, now time.Time) (*Album, *Upgrade, error) {
	a, err := upgradeAlbum(tx, accountID, albumID)
	if err != nil {
		return nil, nil, err
	}
	live, err := liveUpgrade(tx, albumID, now)
	if err != nil {
		return nil, nil, err
	}
	if live == nil || live.IntentID != intentID {
		return nil, nil, upgradeInFlight()
	}
	return a, live, nil
}

func phaseOf(tx Tx, albumID string, now time.Time) (*Phase, error) {
	u, err := liveUpgrade(tx, albumID, now)
	if err != nil {
		return nil, err
	}
	n, err := inFlight(tx, albumID, now)
	if err != nil {
		return nil, err
	}
	return &Phase{AlbumID: albumID, Upgrade: u, InFlight: n}, nil
}

func upgradeInFlight() *fault.Error {
	return fault.Errorf(fault.ECodeUpgradeInFlight, "another upgrade of the album is in flight, or none with this intent_id")
}

// UpgradePhase reads the phase of the account's album.
func (s *Store) UpgradePhase(accountID, albumID string) (*Phase, error) {
	var p *Phase
	err := s.view(func(tx Tx) error {
		if _, err := upgradeAlbum(tx, accountID, albumID); err != nil {
			return err
		}
		var err error
		p, err = phaseOf(tx, albumID, s.now())
		return err
	})
	return p, err
}

// CheckUpgradeAlbum returns error.album.not_found unless the account owns
// the album: what a caller asks before it reads an intent, so an account
// that may not start a ceremony costs no parsing.
func (s *Store) CheckUpgradeAlbum(accountID, albumID string) error {
	return s.view(func(tx Tx) error {
		_, err := upgradeAlbum(tx, accountID, albumID)
		return err
	})
}

// CheckCeremony returns the error CommitUpgrade would for a ceremony that
// is not the account's album's live one (error.album.not_found,
// error.album.upgrade_in_flight): what a caller asks before it reads a
// tombstone.
func (s *Store) CheckCeremony(accountID, albumID, intentID string) error {
	return s.view(func(tx Tx) error {
		_, _, err := liveCeremony(tx, accountID, albumID, intentID, s.now())
		return err
	})
}

// StartUpgrade starts the ceremony u (IntentID, ToProtocolVersion, Intent)
// on the account's album, open for window. The same intent id while it is in
// flight answers the phase as it is, writing nothing, so a retried start
// never forks twice; another ceremony in flight is
// error.album.upgrade_in_flight. A target not newer than the album's pin is
// error.upgrade.bad_target (which versions exist is the caller's to check).
func (s *Store) StartUpgrade(accountID, albumID string, u Upgrade, window time.Duration) (*Phase, error) {
	var p *Phase
	err := s.update(func(tx Tx) error {
		now := s.now()
		a, err := upgradeAlbum(tx, accountID, albumID)
		if err != nil {
			return err
		}
		live, err := liveUpgrade(tx, albumID, now)
		if err != nil {
			return err
		}
		if live != nil && live.IntentID != u.IntentID {
			return upgradeInFlight()
		}
		if live == nil {
			// YYYY-MM-DD strings compare in date order.
			if u.ToProtocolVersion <= a.ProtocolVersion {
				return refuse(RuleUpgradeNewer, u.ToProtocolVersion, a.ProtocolVersion)
			}
			if err := deleteUpgrade(tx, albumID); err != nil {
				return err
			}
			u.ExpiresAt = Deadline(now, window)
			if err := tx.Bucket(bucketUpgrades).Put([]byte(albumID), encode(upgradeRecord(u))); err != nil {
				return err
			}
			if err := putExpiry(tx, u.ExpiresAt, kindUpgrade, []byte(albumID)); err != nil {
				return err
			}
		}
		p, err = phaseOf(tx, albumID, now)
		return err
	})
	return p, err
}

// AbortUpgrade ends the account's album's ceremony when intentID is the one
// in flight, returning the album to normal operation; no ceremony, or
// another one, is error.album.upgrade_in_flight: only the live intent id
// cancels.
func (s *Store) AbortUpgrade(accountID, albumID, intentID string) (*Phase, error) {
	var p *Phase
	err := s.update(func(tx Tx) error {
		now := s.now()
		if _, _, err := liveCeremony(tx, accountID, albumID, intentID, now); err != nil {
			return err
		}
		if err := deleteUpgrade(tx, albumID); err != nil {
			return err
		}
		var err error
		p, err = phaseOf(tx, albumID, now)
		return err
	})
	return p, err
}

// CommitUpgrade completes the ceremony intentID on the account's album: with
// no upload session in flight it re-pins the album to the target protocol,
// keeps the tombstone (and the intent) verbatim, and returns the album to
// normal operation. Sessions still in flight are error.upgrade.not_quiescent;
// no ceremony or another one is error.album.upgrade_in_flight.
func (s *Store) CommitUpgrade(accountID, albumID, intentID string, tombstone []byte) (*Phase, error) {
	var p *Phase
	err := s.update(func(tx Tx) error {
		now := s.now()
		a, live, err := liveCeremony(tx, accountID, albumID, intentID, now)
		if err != nil {
			return err
		}
		if n, err := inFlight(tx, albumID, now); err != nil {
			return err
		} else if n > 0 {
			return fault.Errorf(fault.ECodeUpgradeNotQuiescent, "%d upload sessions are still in flight against the album", n)
		}
		rec := tombstoneRecord{
			FromProtocolVersion: a.ProtocolVersion, ToProtocolVersion: live.ToProtocolVersion,
			Intent: live.Intent, Tombstone: tombstone, CommittedAt: now,
		}
		if err := tx.Bucket(bucketTombstones).Put(join(idPart(albumID), []byte(intentID)), encode(&rec)); err != nil {
			return err
		}
		a.ProtocolVersion = live.ToProtocolVersion
		if err := putAlbum(tx, a); err != nil {
			return err
		}
		if err := deleteUpgrade(tx, albumID); err != nil {
			return err
		}
		p, err = phaseOf(tx, albumID, now)
		return err
	})
	return p, err
}
