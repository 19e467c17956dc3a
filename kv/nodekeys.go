package kv

import (
	"bytes"
	"errors"
	"fmt"
)

// The keys every node of an instance must share live outside the store
// (server.key seals secrets at rest; the log key signs checkpoints), one
// copy per node. The store records what they are so that a node started
// with other keys is refused before it seals a secret no other node can
// open or signs a checkpoint clients cannot verify.
var (
	// metaSealKeyCheck holds a check value derived from server.key (never
	// the key itself: secrets.Fingerprint).
	metaSealKeyCheck = []byte("seal_key_check")
	// metaLogVerifier holds the transparency log's verifier key (public).
	metaLogVerifier = []byte("log_verifier")
)

// ErrKeysDiffer reports a node whose server.key or log key is not the one
// the store was first started with.
var ErrKeysDiffer = errors.New("this node's keys are not the store's")

// BindNodeKeys records sealCheck (a fingerprint of server.key) and
// logVerifier (the transparency log's verifier key) at the first start,
// and from then on returns ErrKeysDiffer, naming which key differs, when
// either differs from what is recorded. A store made before the record
// existed takes the keys of the first node that starts on it.
//
// A store that never served (Served: no account, no log record) is bound
// to the new keys instead, and rebound says so: nothing was sealed or
// signed under the old ones, which a first start that failed after binding
// them (and whose data directory was then deleted) leaves behind.
func (s *Store) BindNodeKeys(sealCheck []byte, logVerifier string) (rebound bool, err error) {
	var differ []string
	err = s.update(func(tx Tx) error {
		differ, rebound = nil, false
		served, err := servedIn(tx)
		if err != nil {
			return err
		}
		meta := tx.Bucket(bucketMeta)
		for _, k := range []struct {
			key   []byte
			value []byte
			name  string
		}{
			{metaSealKeyCheck, sealCheck, "server.key"},
			{metaLogVerifier, []byte(logVerifier), "the transparency log key"},
		} {
			have, err := meta.Get(k.key)
			if err != nil {
				return err
			}
			switch {
			case bytes.Equal(have, k.value):
			case have != nil && served:
				differ = append(differ, k.name)
			default:
				rebound = rebound || have != nil
				if err := meta.Put(k.key, k.value); err != nil {
					return err
				}
			}
		}
		if len(differ) > 0 {
			return ErrKeysDiffer // rolls back: nothing recorded on a refusal
		}
		if rebound {
			// The checkpoints (of the empty log) were signed by the old
			// log key: the next start signs anew under the new one.
			return clearBucket(tx.Bucket(bucketLogMeta))
		}
		return nil
	})
	if errors.Is(err, ErrKeysDiffer) {
		verb := "differs"
		if len(differ) > 1 {
			verb = "differ"
		}
		return false, fmt.Errorf("%w: %s %s from what %s was first started with: every node needs the same copy",
			ErrKeysDiffer, joinNames(differ), verb, s.where)
	}
	return rebound, err
}

// joinNames is "a", "a and b".
func joinNames(names []string) string {
	if len(names) == 2 {
		return names[0] + " and " + names[1]
	}
	return names[0]
}
