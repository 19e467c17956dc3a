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

// Ledger reads the account's session ledger in one read transaction, so
// sessions and cohorts are one consistent picture.
func (s *Store) Ledger(accountID string) (*Ledger, error) {
	var l Ledger
	err := s.view(func(tx Tx) (err error) {
		if l.Sessions, err = liveSessions(tx, accountID, s.now()); err != nil {
			return err
		}
		prefix := idPart(accountID)
		return scanPrefix(tx.Bucket(bucketCohorts), prefix, func(k, v []byte) error {
			var rec cohortRecord
			if err := decode(v, &rec); err != nil {
				return err
			}
			l.Cohorts = append(l.Cohorts, &Cohort{Hash: string(k[len(prefix):]), FirstSeen: rec.FirstSeen.Time(), LastSeen: rec.LastSeen.Time()})
			return nil
		})
	})
	// The scan yields hash order; a stable sort keeps it for equal sightings.
	slices.SortStableFunc(l.Cohorts, func(a, b *Cohort) int { return a.FirstSeen.Compare(b.FirstSeen) })
	return &l, err
}
