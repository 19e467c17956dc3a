package kv

import (
	"bytes"
	"cmp"
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
	keys := nodeKeys(sealCheck, logVerifier)
	err = s.update(func(tx Tx) error {
		rebound = false
		d, err := keysDiffer(tx, keys)
		if differ = d; err != nil || len(differ) > 0 {
			return cmp.Or(err, error(ErrKeysDiffer)) // rolls back: nothing recorded on a refusal
		}
		meta := tx.Bucket(bucketMeta)
		for _, k := range keys {
			have, err := meta.Get(k.key)
			if err != nil {
				return err
			}
			if bytes.Equal(have, k.value) {
				continue
			}
			rebound = rebound || have != nil
			if err := meta.Put(k.key, k.value); err != nil {
				return err
			}
		}
		if rebound {
			// The checkpoints (of the empty log) were signed by the old
			// log key: the next start signs anew under the new one.
			return clearBucket(tx.Bucket(bucketLogMeta))
		}
		return nil
	})
	if errors.Is(err, ErrKeysDiffer) {
		return false, s.keysDifferError(differ)
	}
	return rebound, err
}

// CheckNodeKeys returns, writing nothing, the ErrKeysDiffer that
// BindNodeKeys would return for these keys, or nil: a start checks the keys
// it made before it writes them, so a refused start leaves none behind.
func (s *Store) CheckNodeKeys(sealCheck []byte, logVerifier string) error {
	var differ []string
	err := s.view(func(tx Tx) error {
		var err error
		differ, err = keysDiffer(tx, nodeKeys(sealCheck, logVerifier))
		return err
	})
	if err == nil && len(differ) > 0 {
		err = s.keysDifferError(differ)
	}
	return err
}

// nodeKey is one key's record in the meta bucket: its meta key, the value
// a node's key gives it, and the key's name for messages.
type nodeKey struct {
	key, value []byte
	name       string
}

func nodeKeys(sealCheck []byte, logVerifier string) []nodeKey {
	return []nodeKey{
		{metaSealKeyCheck, sealCheck, "server.key"},
		{metaLogVerifier, []byte(logVerifier), "the transparency log key"},
	}
}

// keysDiffer names the keys whose record differs from keys in a store that
// served; a store that never served differs in nothing (it is bound anew).
func keysDiffer(tx Tx, keys []nodeKey) ([]string, error) {
	served, err := servedIn(tx)
	if err != nil || !served {
		return nil, err
	}
	var differ []string
	for _, k := range keys {
		have, err := tx.Bucket(bucketMeta).Get(k.key)
		if err != nil {
			return nil, err
		}
		if have != nil && !bytes.Equal(have, k.value) {
			differ = append(differ, k.name)
		}
	}
	return differ, nil
}

// keysDifferError is the ErrKeysDiffer naming the keys that differ.
func (s *Store) keysDifferError(differ []string) error {
	verb := "differs"
	if len(differ) > 1 {
		verb = "differ"
	}
	return fmt.Errorf("%w: %s %s from what %s was first started with: every node needs the same copy",
		ErrKeysDiffer, joinNames(differ), verb, s.where)
}

// joinNames is "a", "a and b".
func joinNames(names []string) string {
	if len(names) == 2 {
		return names[0] + " and " + names[1]
	}
	return names[0]
}
