package kv

import "testing"

// SetUsageForTests overwrites an account's usage record, as damage would,
// for the tests of the check that finds it.
func SetUsageForTests(tb testing.TB, s *Store, accountID string, bytes int64) {
	tb.Helper()
	err := s.update(func(tx Tx) error { return tx.Bucket(bucketUsage).Put([]byte(accountID), u64(uint64(bytes))) })
	if err != nil {
		tb.Fatal(err)
	}
}

// KeepAttemptsInStoreForTests makes s keep its password verifications in
// flight in the store, as on a networked engine, though its engine is this
// process's alone: the bbolt suites then run the transactional path too.
func KeepAttemptsInStoreForTests(s *Store) { s.attempts = storedAttempts{s: s} }

// ShareKeysForTests reports whether the store holds a record and a
// tombstone for the link opaqueID, so tests can see what the sweep removed.
func ShareKeysForTests(tb testing.TB, s *Store, opaqueID string) (record, tombstone bool) {
	tb.Helper()
	err := s.view(func(tx Tx) (err error) {
		key := HashToken(opaqueID)
		if record, err = has(tx, bucketShares, key); err != nil {
			return err
		}
		tombstone, err = has(tx, bucketShareTombstones, key)
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return record, tombstone
}
