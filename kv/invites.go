package kv

import (
	"bytes"
	"slices"
	"strings"
	"time"

	"sealbox/kv/fault"
)

// An invitation lets one person register while registration is in invite
// mode (server/PROTOCOL.md §2). The store keeps the code as its SHA-256
// only, like every bearer secret, under the invitation's id, which is what
// the operator lists and revokes by:
//
//   - invites:         id -> inviteRecord
//   - invites_by_code: SHA-256 of the code -> id
//
// Registering with it spends it in the transaction that creates the
// account; an expired one is swept (kindInvite).

// Invite is an outstanding invitation.
type Invite struct {
	ID string
	// Email, when set, is the only (normalized) address that may register
	// with the invitation.
	Email     string
	CreatedAt time.Time
	ExpiresAt time.Time
	// QuotaBytes, when set, is the new account's quota instead of the
	// server's default (0 is unlimited).
	QuotaBytes *int64
}

type inviteRecord struct {
	CodeHash   []byte    `cbor:"1,keyasint"`
	Email      string    `cbor:"2,keyasint,omitempty"`
	CreatedAt  time.Time `cbor:"3,keyasint"`
	ExpiresAt  time.Time `cbor:"4,keyasint"`
	QuotaBytes *int64    `cbor:"5,keyasint,omitempty"`
}

func (r *inviteRecord) invite(id string) Invite {
	return Invite{ID: id, Email: r.Email, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, QuotaBytes: r.QuotaBytes}
}

// CreateInvite records inv (its CreatedAt set by the store) with code,
// kept as its SHA-256 only, until inv.ExpiresAt.
func (s *Store) CreateInvite(inv Invite, code string) error {
	return s.update(func(tx Tx) error {
		rec := inviteRecord{CodeHash: HashToken(code), Email: inv.Email, CreatedAt: s.now(), ExpiresAt: inv.ExpiresAt, QuotaBytes: inv.QuotaBytes}
		if err := tx.Bucket(bucketInvites).Put([]byte(inv.ID), encode(&rec)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketInvitesByCode).Put(rec.CodeHash, []byte(inv.ID)); err != nil {
			return err
		}
		return putExpiry(tx, rec.ExpiresAt, kindInvite, []byte(inv.ID))
	})
}

// Invites lists the outstanding invitations, oldest first. It reads the
// whole invites bucket, a page at a time: an operator's listing.
func (s *Store) Invites() ([]Invite, error) {
	var out []Invite
	err := s.view(func(tx Tx) error {
		out = out[:0]
		now := s.now()
		return scanPages(tx.Bucket(bucketInvites), func(k, v []byte) error {
			var rec inviteRecord
			if err := decode(v, &rec); err != nil {
				return err
			}
			if !reached(rec.ExpiresAt, now) {
				out = append(out, rec.invite(string(k)))
			}
			return nil
		})
	})
	slices.SortFunc(out, func(a, b Invite) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, err
}

// RevokeInvite deletes the outstanding invitation id; one spent, expired,
// revoked or never issued is error.invite.not_found.
func (s *Store) RevokeInvite(id string) error {
	return s.update(func(tx Tx) error {
		rec, err := getRecord[inviteRecord](tx, bucketInvites, []byte(id))
		if err != nil {
			return err
		}
		if rec == nil || reached(rec.ExpiresAt, s.now()) {
			return fault.Errorf(fault.ECodeInviteNotFound, "no outstanding invitation has the id %s", id)
		}
		return deleteInvite(tx, []byte(id), rec)
	})
}

// CheckInvite reports whether code is a live invitation email may register
// with, as error.registration.invite_required when it is not: the early
// answer a registration gets before its password is hashed.
// CreateInvitedAccount checks again.
func (s *Store) CheckInvite(code, email string) error {
	return s.view(func(tx Tx) error {
		_, _, err := liveInvite(tx, code, email, s.now())
		return err
	})
}

// CreateInvitedAccount is CreateAccount spending the invitation code, in
// the same transaction: the account takes the invitation's quota when it
// names one. A code that is not a live invitation for a.Email is
// error.registration.invite_required, whichever reason, and writes
// nothing.
func (s *Store) CreateInvitedAccount(code string, a *Account, first *Session, access, refresh string) error {
	return s.update(func(tx Tx) error {
		id, rec, err := liveInvite(tx, code, a.Email, s.now())
		if err != nil {
			return err
		}
		acct := *a // a stays as given: fn may run more than once
		if rec.QuotaBytes != nil {
			acct.QuotaBytes = *rec.QuotaBytes
		}
		if err := insertAccount(tx, &acct); err != nil {
			return err
		}
		if err := deleteInvite(tx, id, rec); err != nil {
			return err
		}
		return putSession(tx, first, access, refresh)
	})
}

// liveInvite returns the invitation code names when it is live at now and
// email may use it; else error.registration.invite_required, saying no more
// than that.
func liveInvite(tx Tx, code, email string, now time.Time) ([]byte, *inviteRecord, error) {
	refused := fault.Errorf(fault.ECodeInviteRequired, "registration needs a valid invitation")
	id, err := tx.Bucket(bucketInvitesByCode).Get(HashToken(code))
	if err != nil || id == nil {
		if err != nil {
			return nil, nil, err
		}
		return nil, nil, refused
	}
	id = bytes.Clone(id)
	rec, err := getRecord[inviteRecord](tx, bucketInvites, id)
	if err != nil {
		return nil, nil, err
	}
	if rec == nil || reached(rec.ExpiresAt, now) || rec.Email != "" && rec.Email != email {
		return nil, nil, refused
	}
	return id, rec, nil
}

// deleteInvite removes the invitation, its code and its expiry entry.
func deleteInvite(tx Tx, id []byte, rec *inviteRecord) error {
	if err := tx.Bucket(bucketInvitesByCode).Delete(rec.CodeHash); err != nil {
		return err
	}
	if err := tx.Bucket(bucketInvites).Delete(id); err != nil {
		return err
	}
	return deleteExpiry(tx, rec.ExpiresAt, kindInvite, id)
}

// deleteEmailInvites deletes the invitations bound to email (a deleted
// account's). It reads the invites bucket whole: an operator's few
// invitations, on the rare deletion of an account.
func deleteEmailInvites(tx Tx, email string) error {
	type bound struct {
		id  []byte
		rec inviteRecord
	}
	var found []bound
	err := scanPages(tx.Bucket(bucketInvites), func(k, v []byte) error {
		var rec inviteRecord
		if err := decode(v, &rec); err != nil {
			return err
		}
		if rec.Email == email {
			found = append(found, bound{bytes.Clone(k), rec})
		}
		return nil
	})
	for _, b := range found {
		if err != nil {
			break
		}
		err = deleteInvite(tx, b.id, &b.rec)
	}
	return err
}
