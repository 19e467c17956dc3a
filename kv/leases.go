package kv

import (
	"bytes"
	"strings"
	"time"

	"sealbox/kv/engine"
)

// A lease is a named claim that one holder keeps for a while: the work that
// must run on one node at a time (the expiry sweeper, gc, the writer of a
// tus transfer) runs only while its node holds the lease. A lease lives in
// the store, so it holds across every node that shares it, on any engine:
// each take is one serializable update (a compare-and-set). The store's
// clock decides expiry, so a holder that died (or stopped renewing) frees
// its lease when the ttl it last asked for has passed; nodes' clocks must
// agree to well within the ttls they use.
//
//   - leases: name -> leaseRecord
//
// An expired lease is swept through the expiry index, so claims of
// transfers whose node died do not pile up. Work holds a lease through a
// Lease (TakeLease, lease.go), which renews itself and reports its loss;
// TryLease is the one compare-and-set underneath.

type leaseRecord struct {
	Holder    string    `cbor:"1,keyasint"`
	ExpiresAt time.Time `cbor:"2,keyasint"`
}

// TryLease takes the lease name for holder until ttl from now when it is
// free, expired, or already holder's (a renewal moves its expiry), and
// reports whether holder holds it now. A lease another holder keeps live is
// left as it is: false, nil.
func (s *Store) TryLease(name, holder string, ttl time.Duration) (bool, error) {
	other, err := s.tryLease(name, holder, ttl)
	return other == nil && err == nil, err
}

// tryLease is TryLease, which also returns the live lease of another holder
// that kept holder from taking it (nil when holder holds it now).
// Concurrent takes, renewals and releases are committed together
// (commitBatched): a tus PATCH takes, renews and releases its transfer's
// lease, and on PostgreSQL concurrent PATCHes, each in transactions of its
// own, lost conflicts on the leases' index.
func (s *Store) tryLease(name, holder string, ttl time.Duration) (*leaseRecord, error) {
	var other *leaseRecord
	key := []byte(name)
	err := s.commitBatched(leaseReads(key), func(tx Tx) (refusal, err error) {
		other = nil
		now := s.now()
		rec, err := getRecord[leaseRecord](tx, bucketLeases, key)
		if err != nil {
			return nil, err
		}
		if rec != nil {
			if rec.Holder != holder && !reached(rec.ExpiresAt, now) {
				other = rec
				return nil, nil
			}
			if err := deleteExpiry(tx, rec.ExpiresAt, kindLease, key); err != nil {
				return nil, err
			}
		}
		next := leaseRecord{Holder: holder, ExpiresAt: now.Add(ttl)}
		if err := tx.Bucket(bucketLeases).Put(key, encode(&next)); err != nil {
			return nil, err
		}
		return nil, putExpiry(tx, next.ExpiresAt, kindLease, key)
	})
	return other, err
}

// leaseReads lists the key a take or release of the lease key reads, for
// commitBatched.
func leaseReads(key []byte) func() []engine.Key {
	return func() []engine.Key { return []engine.Key{{Bucket: bucketLeases, Key: key}} }
}

// heldBy reports whether holder holds the lease name live at now, inside
// tx; when not, it returns the end of the live lease of whoever holds it
// instead (zero when none does). A write fenced by a lease checks it in
// the same transaction that writes, so a holder that lost its lease (its
// ttl passed, another took it) writes nothing more.
func heldBy(tx Tx, name, holder string, now time.Time) (bool, time.Time, error) {
	rec, err := getRecord[leaseRecord](tx, bucketLeases, []byte(name))
	if err != nil || rec == nil || reached(rec.ExpiresAt, now) {
		return false, time.Time{}, err
	}
	if rec.Holder != holder {
		return false, rec.ExpiresAt, nil
	}
	return true, time.Time{}, nil
}

// ReleaseLease gives up holder's lease name, so another holder may take it at
// once. A lease held by another holder (or by none) is left as it is.
func (s *Store) ReleaseLease(name, holder string) error {
	key := []byte(name)
	return s.commitBatched(leaseReads(key), func(tx Tx) (refusal, err error) {
		rec, err := getRecord[leaseRecord](tx, bucketLeases, key)
		if err != nil || rec == nil || rec.Holder != holder {
			return nil, err
		}
		if err := deleteExpiry(tx, rec.ExpiresAt, kindLease, key); err != nil {
			return nil, err
		}
		return nil, tx.Bucket(bucketLeases).Delete(key)
	})
}

// LeaseHolder names the live holder of the lease name and when its lease
// ends, or "" when the lease is free: what a refusal tells an operator.
func (s *Store) LeaseHolder(name string) (holder string, expiresAt time.Time, err error) {
	err = s.view(func(tx Tx) error {
		rec, err := getRecord[leaseRecord](tx, bucketLeases, []byte(name))
		if err != nil || rec == nil || reached(rec.ExpiresAt, s.now()) {
			return err
		}
		holder, expiresAt = rec.Holder, rec.ExpiresAt
		return nil
	})
	return holder, expiresAt, err
}

// ReleaseLeasesOf gives up every lease whose holder starts with prefix: a
// node that restarts releases what its previous run held (its holders all
// start with the node's id), so a transfer the run was writing when it was
// killed resumes at once instead of after the lease's ttl. The leases bucket
// holds only live claims and those not yet swept, so the walk is short. It
// returns how many it released.
func (s *Store) ReleaseLeasesOf(prefix string) (int, error) {
	var released int
	err := s.update(func(tx Tx) error {
		released = 0
		var keys [][]byte
		var recs []*leaseRecord
		err := scanPages(tx.Bucket(bucketLeases), func(k, v []byte) error {
			var rec leaseRecord
			if err := decode(v, &rec); err != nil {
				return err
			}
			if strings.HasPrefix(rec.Holder, prefix) {
				keys, recs = append(keys, bytes.Clone(k)), append(recs, &rec)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for i, k := range keys {
			if err := deleteExpiry(tx, recs[i].ExpiresAt, kindLease, k); err != nil {
				return err
			}
			if err := tx.Bucket(bucketLeases).Delete(k); err != nil {
				return err
			}
		}
		released = len(keys)
		return nil
	})
	return released, err
}

// renewLease moves the expiry of holder's live lease name to ttl from now
// and returns it; false when the lease is not holder's, or expired: another
// holder may have held it meanwhile, so a holder that let it lapse has lost
// it even when none holds it now.
func (s *Store) renewLease(name, holder string, ttl time.Duration) (bool, time.Time, error) {
	var held bool
	var until time.Time
	err := s.update(func(tx Tx) error {
		held = false
		now := s.now()
		key := []byte(name)
		rec, err := getRecord[leaseRecord](tx, bucketLeases, key)
		if err != nil || rec == nil || rec.Holder != holder || reached(rec.ExpiresAt, now) {
			return err
		}
		if err := deleteExpiry(tx, rec.ExpiresAt, kindLease, key); err != nil {
			return err
		}
		held = true
		until = now.Add(ttl)
		if err := tx.Bucket(bucketLeases).Put(key, encode(&leaseRecord{Holder: holder, ExpiresAt: until})); err != nil {
			return err
		}
		return putExpiry(tx, until, kindLease, key)
	})
	return held && err == nil, until, err
}
