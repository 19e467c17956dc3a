package kv

import (
	"time"

	bolt "go.etcd.io/bbolt"
)

// Records that expire register an entry in the expiry index, keyed by
// expiry instant (big-endian Unix nanoseconds) then kind then record id, so
// Sweep reads only what is due and never scans a whole bucket. An index
// entry is a hint: the record's own expiry decides, so a record whose expiry
// moved later keeps living after an older entry is swept. Every read checks
// expiry itself, so nothing is honoured between its expiry and the sweep.
const (
	kindSession      byte = 's'
	kindSpentRefresh byte = 'r'
	kindLockout      byte = 'l'
	kindMFAChallenge byte = 'm'
	kindUpload       byte = 'u'
	kindChallenge    byte = 'c'
	kindEnrollCode   byte = 'e'
	kindChannel      byte = 'h'
	kindShare        byte = 'k'
	kindUpgrade      byte = 'g'
)

// Deadline is the expiry of a record that lives for ttl from now, cut to a
// whole second. The API shows every expiry in whole seconds (Unix seconds
// or RFC 3339 without fractions), and a record must stop being honoured at
// the instant shown, not up to a second after it.
func Deadline(now time.Time, ttl time.Duration) time.Time {
	return now.Add(ttl).Truncate(time.Second)
}

// sweeper removes record id of its kind if it is expired at now.
type sweeper func(tx *bolt.Tx, id []byte, now time.Time) error

var sweepers = map[byte]sweeper{
	kindSession:      sweepSession,
	kindSpentRefresh: sweepSpentRefresh,
	kindLockout:      sweepLockout,
	kindMFAChallenge: sweepMFAChallenge,
	kindUpload:       sweepUpload,
	kindChallenge:    sweepChallenge,
	kindEnrollCode:   sweepEnrollCode,
	kindChannel:      sweepChannel,
	kindShare:        sweepShare,
	kindUpgrade:      sweepUpgrade,
}

func putExpiry(tx *bolt.Tx, at time.Time, kind byte, id []byte) error {
	return tx.Bucket(bucketExpiry).Put(join(timeKey(at), []byte{kind}, id), nil)
}

func deleteExpiry(tx *bolt.Tx, at time.Time, kind byte, id []byte) error {
	return tx.Bucket(bucketExpiry).Delete(join(timeKey(at), []byte{kind}, id))
}

// sweepBatch bounds one sweep transaction so the writer lock is never held
// for long; Sweep loops until nothing due remains.
const sweepBatch = 1000

// Sweep deletes records whose expiry has passed and reports how many index
// entries it processed.
func (s *Store) Sweep() (int, error) {
	total := 0
	for {
		n := 0
		err := s.update(func(tx *bolt.Tx) error {
			now := s.now()
			c := tx.Bucket(bucketExpiry).Cursor()
			limit := timeKey(now)
			var due [][]byte
			for k, _ := c.First(); k != nil && len(due) < sweepBatch; k, _ = c.Next() {
				if string(k[:8]) > string(limit) {
					break
				}
				due = append(due, copyBytes(k))
			}
			for _, k := range due {
				if err := tx.Bucket(bucketExpiry).Delete(k); err != nil {
					return err
				}
				if sw := sweepers[k[8]]; sw != nil {
					if err := sw(tx, k[9:], now); err != nil {
						return err
					}
				}
			}
			n = len(due)
			return nil
		})
		total += n
		if err != nil || n < sweepBatch {
			return total, err
		}
	}
}

// DueExpiries counts the index entries Sweep would process now, deleting
// nothing: what gc --dry-run reports.
func (s *Store) DueExpiries() (int, error) {
	n := 0
	err := s.db.View(func(tx *bolt.Tx) error {
		limit := string(timeKey(s.now()))
		c := tx.Bucket(bucketExpiry).Cursor()
		for k, _ := c.First(); k != nil && string(k[:8]) <= limit; k, _ = c.Next() {
			n++
		}
		return nil
	})
	return n, err
}
