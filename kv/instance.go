package kv

import (
	"bytes"
	"errors"
	"fmt"
)

// An instance is one sealbox installation: one store and the one blob
// store whose blobs it records. Nodes sharing a store are one instance; a
// restored copy is another. The store keeps the instance's id so that a
// command pointed at a blob store and a record store of two different
// instances (gc would delete every blob the store does not record) is
// refused; the blob store keeps the same id in a marker of its own.
//
//   - meta "instance_id": the instance's id, written once
//   - meta "instance_marking": set while the blob store's marker is being
//     written (see MarkingBlobs)
//   - meta "restoring": the source of a restore that has not finished;
//     nothing may serve from such a store
var (
	metaInstanceID      = []byte("instance_id")
	metaInstanceMarking = []byte("instance_marking")
	metaRestoring       = []byte("restoring")
)

// Instance is what the store records of its instance.
type Instance struct {
	// ID is the instance's id, "" for a store written before ids existed
	// (or never started).
	ID string
	// Marking is set when the id was written into the store and its blob
	// store was unmarked at the time: the blob store's marker may still be
	// missing, and the blob store found unmarked is this instance's.
	Marking bool
	// Restoring names the backup a restore into this store was copying
	// when it stopped; "" when no restore is under way.
	Restoring string
}

// Instance reads what the store records of its instance.
func (s *Store) Instance() (Instance, error) {
	var in Instance
	err := s.view(func(tx Tx) error {
		in = Instance{}
		meta := tx.Bucket(bucketMeta)
		for _, f := range []struct {
			key []byte
			to  *string
		}{{metaInstanceID, &in.ID}, {metaRestoring, &in.Restoring}} {
			v, err := meta.Get(f.key)
			if err != nil {
				return err
			}
			*f.to = string(v)
		}
		v, err := meta.Get(metaInstanceMarking)
		in.Marking = v != nil
		return err
	})
	return in, err
}

// ErrOtherInstance reports a store that already belongs to another
// instance than the one asked for.
var ErrOtherInstance = errors.New("the store belongs to another instance")

// AdoptInstance records id as the store's instance when it has none, with
// marking set when the caller is about to mark an unmarked blob store (and
// clears marking when not). A store with another id is left as it is:
// ErrOtherInstance.
func (s *Store) AdoptInstance(id string, marking bool) error {
	return s.update(func(tx Tx) error {
		meta := tx.Bucket(bucketMeta)
		have, err := meta.Get(metaInstanceID)
		if err != nil {
			return err
		}
		if have != nil && string(have) != id {
			return fmt.Errorf("%w: %s is instance %s, not %s", ErrOtherInstance, s.where, have, id)
		}
		if err := meta.Put(metaInstanceID, []byte(id)); err != nil {
			return err
		}
		if marking {
			return meta.Put(metaInstanceMarking, member)
		}
		return meta.Delete(metaInstanceMarking)
	})
}

// housekeeping are the buckets a store holds records in before it served
// anything: the meta bucket, the leases and password checks of nodes that
// started, the expiry entries of those leases, and the log's checkpoints
// (every start signs one, of the empty log until a record is published;
// the records themselves live in the log's own bucket).
var housekeeping = map[string]bool{
	string(bucketMeta): true, string(bucketLeases): true, string(bucketPasswordAttempts): true,
	string(bucketExpiry): true, string(bucketLogMeta): true,
}

// Served reports whether the store holds any record a node wrote while
// serving (an account, a log entry, a blob record, anything but the
// housekeeping of a start). A store that never served holds nothing a
// client has seen: its node keys may be bound again and a restore may copy
// into it.
func (s *Store) Served() (bool, error) {
	var served bool
	err := s.view(func(tx Tx) (err error) {
		served, err = servedIn(tx)
		return err
	})
	return served, err
}

// servedIn is Served inside a transaction.
func servedIn(tx Tx) (bool, error) {
	served := false
	for _, name := range domainBuckets {
		if housekeeping[string(name)] {
			continue
		}
		err := tx.Bucket(name).Scan(Range{Limit: 1}, func(_, _ []byte) error {
			served = true
			return ErrStopScan
		})
		if err != nil || served {
			return served, err
		}
	}
	return false, nil
}

// ErrNotEmpty refuses a restore into a store that holds records.
var ErrNotEmpty = errors.New("the store is not empty")

// BeginRestore marks the store as the target of a restore of source (a
// name of the backup that stays the same across runs), so nothing serves
// from it until FinishRestore, and returns the id of the instance the
// restore makes: the store's own when it has one (a store that was started
// but never served), else newID. A store that holds records is refused
// (ErrNotEmpty) unless it is the target of an unfinished restore of the
// same source, which this run then continues under the id it chose.
func (s *Store) BeginRestore(source, newID string) (id string, err error) {
	served, err := s.Served()
	if err != nil {
		return "", err
	}
	err = s.update(func(tx Tx) error {
		meta := tx.Bucket(bucketMeta)
		have, err := meta.Get(metaRestoring)
		if err != nil {
			return err
		}
		current, err := meta.Get(metaInstanceID)
		if err != nil {
			return err
		}
		id = string(current)
		switch {
		case have != nil && string(have) != source:
			return fmt.Errorf("%w: %s holds an unfinished restore of another backup (%s); empty it before restoring this one", ErrNotEmpty, s.where, have)
		case have != nil:
			return nil
		case served:
			return fmt.Errorf("%w: %s already holds accounts or other records; restore only into an empty store, never over data", ErrNotEmpty, s.where)
		}
		if id == "" {
			id = newID
		}
		if err := meta.Put(metaInstanceID, []byte(id)); err != nil {
			return err
		}
		if err := meta.Delete(metaInstanceMarking); err != nil {
			return err
		}
		return meta.Put(metaRestoring, []byte(source))
	})
	return id, err
}

// CopyRecordsFrom copies every record of src into the store, a thousand
// records a transaction, as of one read transaction of src. It is for a
// restore the store is the target of (BeginRestore): copying again after an
// interruption writes the same records again, and the store's restore mark
// and instance id are kept.
func (s *Store) CopyRecordsFrom(src *Store) error {
	defer s.wrote()
	var keep [][2][]byte
	err := s.view(func(tx Tx) error {
		keep = keep[:0]
		for _, k := range [][]byte{metaRestoring, metaInstanceID, metaInstanceMarking} {
			v, err := tx.Bucket(bucketMeta).Get(k)
			if err != nil {
				return err
			}
			keep = append(keep, [2][]byte{k, bytes.Clone(v)})
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = src.view(func(tx Tx) error {
		for _, name := range storeBuckets() {
			if err := copyBucket(s.engine, name, tx.Bucket(name)); err != nil {
				return fmt.Errorf("copy bucket %s: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.update(func(tx Tx) error {
		meta := tx.Bucket(bucketMeta)
		for _, kv := range keep {
			var err error
			if kv[1] == nil {
				err = meta.Delete(kv[0])
			} else {
				err = meta.Put(kv[0], kv[1])
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// FinishRestore ends a restore: the store becomes the instance id (a new
// one, never the backup's: the instance the backup was taken of may still
// run, and its blob store must never pass for this one's) and may serve.
func (s *Store) FinishRestore(id string) error {
	return s.update(func(tx Tx) error {
		meta := tx.Bucket(bucketMeta)
		if err := meta.Put(metaInstanceID, []byte(id)); err != nil {
			return err
		}
		if err := meta.Delete(metaInstanceMarking); err != nil {
			return err
		}
		return meta.Delete(metaRestoring)
	})
}
