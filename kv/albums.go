package kv

import (
	"time"

	"sealbox/kv/fault"
)

// Album is an album id bound to the account that provisioned it.
type Album struct {
	ID      string
	OwnerID string
	// ProtocolVersion is the protocol date (YYYY-MM-DD) the album is pinned
	// to, the server's at creation.
	ProtocolVersion string
	CreatedAt       time.Time
	// SyncSeq is the feed position of the album's last applied lifecycle
	// op; 0 until one is applied.
	SyncSeq uint64
	// DeletedAt is set while the album is deleted (DeleteAlbum), by the
	// tombstone whose hash is Tombstone, restorable until PurgeAt.
	DeletedAt time.Time
	Tombstone string
	PurgeAt   time.Time
}

type albumRecord struct {
	ID              string    `cbor:"1,keyasint"`
	OwnerID         string    `cbor:"2,keyasint"`
	ProtocolVersion string    `cbor:"3,keyasint"`
	CreatedAt       time.Time `cbor:"4,keyasint"`
	SyncSeq         uint64    `cbor:"5,keyasint"`
	DeletedAt       time.Time `cbor:"6,keyasint,omitempty"`
	Tombstone       string    `cbor:"7,keyasint,omitempty"`
	PurgeAt         time.Time `cbor:"8,keyasint,omitempty"`
}

// albumIndexKey orders one account's albums by creation time, then id, so
// listing them is a prefix scan of the account's rows.
func albumIndexKey(accountID string, created time.Time, albumID string) []byte {
	return join(idPart(accountID), timeKey(created), []byte(albumID))
}

// getAlbum returns nil, nil when no album has the id.
func getAlbum(tx Tx, id string) (*Album, error) {
	rec, err := getRecord[albumRecord](tx, bucketAlbums, []byte(id))
	if rec == nil {
		return nil, err
	}
	return (*Album)(rec), nil
}

func putAlbum(tx Tx, a *Album) error {
	return tx.Bucket(bucketAlbums).Put([]byte(a.ID), encode(albumRecord(*a)))
}

// ProvisionAlbum binds albumID to accountID, pinned to protocolVersion, and
// reports created=true. When the account already holds the album it returns
// the album as stored and created=false, writing nothing (provisioning is
// idempotent). An album id held by another account is error.album.forbidden.
func (s *Store) ProvisionAlbum(accountID, albumID, protocolVersion string) (a *Album, created bool, err error) {
	err = s.update(func(tx Tx) (err error) {
		// Results are set afresh on every run: fn may run more than once.
		a, created, err = provisionAlbum(tx, s.now(), accountID, albumID, protocolVersion)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return a, created, nil
}

// provisionAlbum is ProvisionAlbum inside tx at now.
func provisionAlbum(tx Tx, now time.Time, accountID, albumID, protocolVersion string) (*Album, bool, error) {
	a, err := getAlbum(tx, albumID)
	if err != nil {
		return nil, false, err
	}
	if a != nil {
		if a.OwnerID != accountID {
			return nil, false, fault.Errorf(fault.ECodeAlbumForbidden, "the album belongs to another account")
		}
		return a, false, nil
	}
	a = &Album{ID: albumID, OwnerID: accountID, ProtocolVersion: protocolVersion, CreatedAt: now}
	if err := putAlbum(tx, a); err != nil {
		return nil, false, err
	}
	return a, true, tx.Bucket(bucketAlbumsByAccount).Put(albumIndexKey(accountID, a.CreatedAt, albumID), nil)
}

// Albums lists the account's albums, oldest first (ties by id).
func (s *Store) Albums(accountID string) ([]*Album, error) {
	var out []*Album
	err := s.view(func(tx Tx) error {
		prefix := idPart(accountID)
		return scanPrefix(tx.Bucket(bucketAlbumsByAccount), prefix, func(k, _ []byte) error {
			a, err := getAlbum(tx, string(k[len(prefix)+8:]))
			if a != nil {
				out = append(out, a)
			}
			return err
		})
	})
	return out, err
}
