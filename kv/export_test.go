package kv

// KeepAttemptsInStoreForTests makes s keep its password verifications in
// flight in the store, as on a shared engine, though its engine is this
// process's alone: the bbolt suites then run the transactional path too.
func KeepAttemptsInStoreForTests(s *Store) { s.localAttempts = nil }
