package kv

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"sealbox/kv/fault"
)

// UserSummary is one row of the operator's user listing.
type UserSummary struct {
	Account      Account
	LiveSessions int
	// Locked reports a password lockout in force now.
	Locked bool
	Albums int
	// BlobsHeld and BytesHeld count every blob the account holds once.
	BlobsHeld int
	BytesHeld int64
}

// UserSummaries lists every account, ordered by email. It reads the whole
// accounts bucket, a page at a time: an operator's listing, never a request
// path.
func (s *Store) UserSummaries() ([]UserSummary, error) {
	var out []UserSummary
	err := s.view(func(tx Tx) error {
		now := s.now()
		return scanPages(tx.Bucket(bucketAccountsByEmail), func(_, id []byte) error {
			a, err := getAccount(tx, string(id))
			if err != nil {
				return err
			}
			row, err := summarize(tx, a, now)
			if err != nil {
				return err
			}
			out = append(out, row)
			return nil
		})
	})
	return out, err
}

// UserSummary returns the listing row of the account registered under email.
func (s *Store) UserSummary(email string) (UserSummary, error) {
	var row UserSummary
	err := s.view(func(tx Tx) error {
		a, err := mustAccountByEmail(tx, email)
		if err != nil {
			return err
		}
		row, err = summarize(tx, a, s.now())
		return err
	})
	return row, err
}

func summarize(tx Tx, a *Account, now time.Time) (UserSummary, error) {
	row := UserSummary{Account: *a}
	var err error
	if row.BlobsHeld, err = heldCount(tx, a.ID); err != nil {
		return row, err
	}
	if row.BytesHeld, err = usage(tx, a.ID); err != nil {
		return row, err
	}
	err = scanPrefix(tx.Bucket(bucketAlbumsByAccount), idPart(a.ID), func([]byte, []byte) error {
		row.Albums++
		return nil
	})
	if err != nil {
		return row, err
	}
	ids, err := accountSessionIDs(tx, a.ID)
	if err != nil {
		return row, err
	}
	for _, id := range ids {
		sess, err := getSession(tx, id)
		if err != nil {
			return row, err
		}
		if sess != nil && now.Before(sess.RefreshExpiresAt) {
			row.LiveSessions++
		}
	}
	lock, err := getRecord[lockoutRecord](tx, bucketLockouts, []byte(a.Email))
	if lock != nil {
		row.Locked = now.Before(lock.LockedUntil)
	}
	return row, err
}

func mustAccountByEmail(tx Tx, email string) (*Account, error) {
	a, err := getAccountByEmail(tx, email)
	if err == nil && a == nil {
		return nil, fault.Errorf(fault.ECodeAccountNotFound, "no account is registered under %s", email)
	}
	return a, err
}

// SetDisabled disables or enables the account registered under email.
// Disabling also closes every session of the account, in the same
// transaction, and reports how many were closed. While the account is
// disabled its share links read as not found and its relay channels and
// enrollment codes as unknown (ownerActive); enabling it again brings back
// those still live, the sessions excepted.
func (s *Store) SetDisabled(email string, disabled bool) (int, error) {
	revoked := 0
	err := s.update(func(tx Tx) error {
		revoked = 0 // set afresh on every run: fn may run more than once
		a, err := mustAccountByEmail(tx, email)
		if err != nil {
			return err
		}
		a.Disabled = disabled
		if err := putAccount(tx, a); err != nil {
			return err
		}
		if disabled {
			revoked, err = deleteAccountSessions(tx, a.ID, "")
		}
		return err
	})
	return revoked, err
}

// SetQuota sets the account's quota in bytes; 0 is unlimited.
func (s *Store) SetQuota(email string, quota int64) error {
	return s.update(func(tx Tx) error {
		a, err := mustAccountByEmail(tx, email)
		if err != nil {
			return err
		}
		a.QuotaBytes = quota
		return putAccount(tx, a)
	})
}

// ResetSecondFactor removes every second factor of the account, confirmed
// or pending, of every kind (for a user who lost their authenticator), and
// closes every session, in one transaction. An account with none is left
// untouched, its sessions too, and removed is false. The replay ledger
// stays: a step is a moment in time, not a property of one secret.
func (s *Store) ResetSecondFactor(email string) (removed bool, revoked int, err error) {
	err = s.update(func(tx Tx) error {
		removed, revoked = false, 0
		a, err := mustAccountByEmail(tx, email)
		if err != nil {
			return err
		}
		if len(a.Factors) == 0 {
			return nil
		}
		removed = true
		a.Factors = nil
		if err := putAccount(tx, a); err != nil {
			return err
		}
		revoked, err = deleteAccountSessions(tx, a.ID, "")
		return err
	})
	return removed, revoked, err
}

// AccountBytes is an account and the bytes of the blobs it holds.
type AccountBytes struct {
	AccountID string
	Bytes     int64
}

// LargestAccounts returns the n accounts that hold the most bytes, largest
// first, ties by account id; accounts holding nothing are left out. It
// reads the whole usage table (one 8-byte row per account that ever held a
// blob), a page at a time: for the metrics scrape, never a request path.
func (s *Store) LargestAccounts(n int) ([]AccountBytes, error) {
	var top []AccountBytes
	err := s.view(func(tx Tx) error {
		top = top[:0]
		return scanPages(tx.Bucket(bucketUsage), func(k, v []byte) error {
			if len(v) != 8 || readU64(v) == 0 {
				return nil
			}
			row := AccountBytes{AccountID: string(k), Bytes: int64(readU64(v))}
			i, _ := slices.BinarySearchFunc(top, row, largerFirst)
			if i < n {
				top = slices.Insert(top, i, row)[:min(len(top)+1, n)]
			}
			return nil
		})
	})
	return top, err
}

// largerFirst orders AccountBytes by bytes, largest first, then by id.
func largerFirst(a, b AccountBytes) int {
	if c := cmp.Compare(b.Bytes, a.Bytes); c != 0 {
		return c
	}
	return strings.Compare(a.AccountID, b.AccountID)
}

// SetPassword is the operator's password reset: it writes the new hash of
// the account registered under email, closes every session and pending
// sign-in challenge of it and clears the address's lockout, in one
// transaction, and reports how many sessions were closed.
func (s *Store) SetPassword(email, hash string) (int, error) {
	revoked := 0
	err := s.update(func(tx Tx) error {
		revoked = 0 // set afresh on every run: fn may run more than once
		a, err := mustAccountByEmail(tx, email)
		if err != nil {
			return err
		}
		a.PasswordHash = hash
		if err := putAccount(tx, a); err != nil {
			return err
		}
		if err := clearLockout(tx, a.Email); err != nil {
			return err
		}
		revoked, err = deleteAccountSessions(tx, a.ID, "")
		return err
	})
	return revoked, err
}
