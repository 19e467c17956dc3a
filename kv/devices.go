package kv

import (
	"slices"
	"time"
)

// Cohort is an advisory device cohort the account has been seen under. It
// groups sessions in the ledger and gates nothing. A cohort outlives the
// sessions that carried it.
type Cohort struct {
	Hash      string
	FirstSeen time.Time
	LastSeen  time.Time
}

type cohortRecord struct {
	FirstSeen nanoTime `cbor:"1,keyasint"`
	LastSeen  nanoTime `cbor:"2,keyasint"`
}

// cohortKey is idPart(accountID)|hash: one account's cohorts are exactly the
// keys with its idPart as prefix, so listing them is a prefix scan, never a
// full scan, and never sees an account whose id extends this one.
func cohortKey(accountID, hash string) []byte {
	return join(idPart(accountID), []byte(hash))
}

// sightCohort records that the session's account was seen under its cohort
// when the session was opened. A session without a cohort records nothing.
func sightCohort(tx Tx, sess *Session) error {
	if sess.CohortHash == "" {
		return nil
	}
	key := cohortKey(sess.AccountID, sess.CohortHash)
	rec, err := getRecord[cohortRecord](tx, bucketCohorts, key)
	if err != nil {
		return err
	}
	if rec == nil {
		rec = &cohortRecord{FirstSeen: toNano(sess.CreatedAt)}
	}
	rec.LastSeen = toNano(sess.CreatedAt)
	return tx.Bucket(bucketCohorts).Put(key, encode(rec))
}

// Ledger is an account's session ledger: its live sessions, oldest first
// (ties by id), and every cohort it has ever been seen under, by first
// sighting (ties by hash).
type Ledger struct {
	Sessions []*Session
	Cohorts  []*Cohort
}

// Ledger reads the account's whole session ledger in one read transaction,
// so sessions and cohorts are one consistent picture.
func (s *Store) Ledger(accountID string) (*Ledger, error) {
	l, _, err := s.LedgerPage(accountID, nil, 0)
	return l, err
}

// LedgerPage reads one page of the account's session ledger in one read
// transaction: at most limit live sessions (0: all) after the position
// after names (nil: from the oldest), oldest first, ties by id; and, on the
// first page only, every cohort. next names the position after the page's
// last session when more live sessions follow, and is nil on the last page.
// A position is opaque to callers: a page's next, handed back as after.
func (s *Store) LedgerPage(accountID string, after []byte, limit int) (l *Ledger, next []byte, err error) {
	l = &Ledger{}
	err = s.view(func(tx Tx) (err error) {
		*l = Ledger{}
		if l.Sessions, next, err = sessionPage(tx, accountID, after, limit, s.now()); err != nil || after != nil {
			return err
		}
		l.Cohorts, err = accountCohorts(tx, accountID)
		return err
	})
	return l, next, err
}

// LedgerPosition is the position a page's last session names: its place in
// the account's session index (creation time, then id).
func LedgerPosition(sess *Session) []byte { return join(timeKey(sess.CreatedAt), []byte(sess.ID)) }

// sessionPage lists at most limit (0: every) live sessions of the account
// whose index position is after after (nil: all), and the position of the
// last one when a further live session follows. Index keys are read a
// batch at a time and the sessions after each batch, so no read happens
// inside a scan; expired sessions the sweep has not yet removed are skipped.
func sessionPage(tx Tx, accountID string, after []byte, limit int, now time.Time) ([]*Session, []byte, error) {
	prefix := idPart(accountID)
	r := prefixRange(prefix)
	if after != nil {
		r.From = join(prefix, after, []byte{0}) // the least key after the position
	}
	var out []*Session
	for {
		r.Limit = max(limit+1, 64)
		var keys [][]byte
		err := tx.Bucket(bucketSessionsByAccount).Scan(r, func(k, _ []byte) error {
			keys = append(keys, copyBytes(k))
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
		for _, k := range keys {
			sess, err := getSession(tx, k[len(prefix)+8:])
			if err != nil {
				return nil, nil, err
			}
			if sess == nil || reached(sess.RefreshExpiresAt, now) {
				continue
			}
			if limit > 0 && len(out) == limit {
				return out, LedgerPosition(out[len(out)-1]), nil
			}
			out = append(out, sess)
		}
		if len(keys) < r.Limit {
			return out, nil, nil
		}
		r.From = append(keys[len(keys)-1], 0)
	}
}

// accountCohorts lists every cohort the account was seen under, by first
// sighting (ties by hash).
func accountCohorts(tx Tx, accountID string) ([]*Cohort, error) {
	var out []*Cohort
	prefix := idPart(accountID)
	err := scanPrefix(tx.Bucket(bucketCohorts), prefix, func(k, v []byte) error {
		var rec cohortRecord
		if err := decode(v, &rec); err != nil {
			return err
		}
		out = append(out, &Cohort{Hash: string(k[len(prefix):]), FirstSeen: rec.FirstSeen.Time(), LastSeen: rec.LastSeen.Time()})
		return nil
	})
	// The scan yields hash order; a stable sort keeps it for equal sightings.
	slices.SortStableFunc(out, func(a, b *Cohort) int { return a.FirstSeen.Compare(b.FirstSeen) })
	return out, err
}
