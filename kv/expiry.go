package kv

import (
	"time"
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
	kindShareTomb    byte = 'K'
	kindUpgrade      byte = 'g'
	kindLease        byte = 'L'
	kindAttempt      byte = 'a'
	kindTOTPAttempts byte = 't'
	kindInvite       byte = 'i'
	kindTrash        byte = 'T'
)

// Deadline is the expiry of a record that lives for ttl from now, cut to a
// whole second. The API shows every expiry in whole seconds (Unix seconds
// or RFC 3339 without fractions), and a record must stop being honoured at
// the instant shown, not up to a second after it.
func Deadline(now time.Time, ttl time.Duration) time.Time {
	return now.Add(ttl).Truncate(time.Second)
}

// sweeper removes record id of its kind if it is expired at now.
type sweeper func(tx Tx, id []byte, now time.Time) error

// sweepRecord is the one sweeper, for every kind of expiring record: it
// reads the record under id in bucket and, when the record says it has
// expired at now (not the index entry, which may be stale), removes it with
// remove, which takes away what points at it too; nil deletes the record
// alone.
func sweepRecord[T any](bucket []byte, expired func(rec *T, now time.Time) bool, remove func(tx Tx, id []byte, rec *T) error) sweeper {
	return func(tx Tx, id []byte, now time.Time) error {
		rec, err := getRecord[T](tx, bucket, id)
		if err != nil || rec == nil || !expired(rec, now) {
			return err
		}
		if remove == nil {
			return tx.Bucket(bucket).Delete(id)
		}
		return remove(tx, id, rec)
	}
}

// reached is the expiry rule of every record: it has expired from the
// instant it names on.
func reached(expiresAt, now time.Time) bool { return !now.Before(expiresAt) }

var sweepers = map[byte]sweeper{
	kindSession: sweepRecord(bucketSessions,
		func(r *sessionRecord, now time.Time) bool { return reached(r.RefreshExpiresAt.Time(), now) },
		func(tx Tx, id []byte, _ *sessionRecord) error { _, err := deleteSession(tx, id); return err }),
	kindSpentRefresh: sweepRecord(bucketSpentRefresh,
		func(r *spentRefreshRecord, now time.Time) bool { return reached(r.ExpiresAt, now) }, nil),
	kindLockout: sweepRecord(bucketLockouts,
		func(r *lockoutRecord, now time.Time) bool { return reached(r.ExpiresAt, now) }, nil),
	kindMFAChallenge: sweepRecord(bucketMFAChallenges,
		func(r *mfaChallengeRecord, now time.Time) bool { return reached(r.ExpiresAt, now) }, deleteMFAChallenge),
	kindUpload: sweepRecord(bucketUploads,
		func(r *uploadRecord, now time.Time) bool { return reached(r.ExpiresAt, now) },
		func(tx Tx, key []byte, r *uploadRecord) error { return deleteUpload(tx, key, (*Upload)(r)) }),
	kindChallenge: sweepRecord(bucketRevokeChallenges,
		func(r *challengeRecord, now time.Time) bool { return reached(r.ExpiresAt, now) }, nil),
	kindEnrollCode: sweepRecord(bucketEnrollCodes,
		func(r *enrollCodeRecord, now time.Time) bool { return reached(r.ExpiresAt, now) }, deleteEnrollCode),
	kindChannel: sweepRecord(bucketRelayChannels,
		func(r *channelRecord, now time.Time) bool { return reached(r.ExpiresAt, now) }, deleteChannel),
	kindShare:     sweepShare,
	kindShareTomb: sweepRecord(bucketShareTombstones, (*shareTombstone).expired, nil),
	kindUpgrade: sweepRecord(bucketUpgrades,
		func(r *upgradeRecord, now time.Time) bool { return reached(r.ExpiresAt, now) },
		func(tx Tx, albumID []byte, _ *upgradeRecord) error { return deleteUpgrade(tx, string(albumID)) }),
	kindLease: sweepRecord(bucketLeases,
		func(r *leaseRecord, now time.Time) bool { return reached(r.ExpiresAt, now) }, nil),
	kindAttempt: sweepRecord(bucketPasswordAttempts,
		func(r *attemptRecord, now time.Time) bool { return reached(r.ExpiresAt, now) }, nil),
	kindTOTPAttempts: sweepRecord(bucketTOTPAttempts,
		func(r *codeFailuresRecord, now time.Time) bool { return reached(r.ExpiresAt.Time(), now) }, nil),
	kindTrash: sweepTrash,
	kindInvite: sweepRecord(bucketInvites,
		func(r *inviteRecord, now time.Time) bool { return reached(r.ExpiresAt, now) }, deleteInvite),
}

func putExpiry(tx Tx, at time.Time, kind byte, id []byte) error {
	return tx.Bucket(bucketExpiry).Put(join(timeKey(at), []byte{kind}, id), nil)
}

func deleteExpiry(tx Tx, at time.Time, kind byte, id []byte) error {
	return tx.Bucket(bucketExpiry).Delete(join(timeKey(at), []byte{kind}, id))
}

// dueRange selects the expiry index entries due at now (every instant up to
// and including now), at most limit of them (0: all).
func dueRange(now time.Time, limit int) Range {
	return Range{To: timeKey(now.Add(time.Nanosecond)), Limit: limit}
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
		err := s.update(func(tx Tx) error {
			now := s.now()
			var due [][]byte
			err := tx.Bucket(bucketExpiry).Scan(dueRange(now, sweepBatch), func(k, _ []byte) error {
				due = append(due, copyBytes(k))
				return nil
			})
			if err != nil {
				return err
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
	err := s.view(func(tx Tx) error {
		return tx.Bucket(bucketExpiry).Scan(dueRange(s.now(), 0), func(_, _ []byte) error {
			n++
			return nil
		})
	})
	return n, err
}
