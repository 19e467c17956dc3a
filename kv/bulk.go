package kv

// Bulk writes many records in one transaction: large fixtures for
// benchmarks, and imports. It applies no policy beyond the email index's
// uniqueness: callers hand it records that are already valid.
type Bulk struct{ tx Tx }

// Bulk runs fn in one write transaction; nothing is written if fn fails.
func (s *Store) Bulk(fn func(*Bulk) error) error {
	return s.update(func(tx Tx) error { return fn(&Bulk{tx: tx}) })
}

// Account writes a new account and its email index entry.
func (b *Bulk) Account(a *Account) error { return insertAccount(b.tx, a) }

// Session writes a session with its token lookups.
func (b *Bulk) Session(s *Session, access, refresh string) error {
	return putSession(b.tx, s, access, refresh)
}

// Hold records that the account holds b (charging its usage).
func (b *Bulk) Hold(accountID string, blob Blob) error {
	_, err := holdBlob(b.tx, accountID, blob, blob.StoredAt)
	return err
}
