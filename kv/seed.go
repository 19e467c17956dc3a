package kv

import bolt "go.etcd.io/bbolt"

// SeedSessions writes many sessions in one transaction, with bearer secrets
// from tokens. It exists for benchmarks that need a store of production size:
// the API opens one session per transaction, which for a million sessions
// would take hours of fsyncs. Cohorts are not sighted.
func (s *Store) SeedSessions(sessions []*Session, tokens func(*Session) (access, refresh string)) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, sess := range sessions {
			access, refresh := tokens(sess)
			if err := putSession(tx, sess, access, refresh); err != nil {
				return err
			}
		}
		return nil
	})
}
