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
