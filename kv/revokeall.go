package kv

import (
	"time"

	"sealbox/kv/fault"
)

// A revoke-all challenge is a single-use token issued to a session of an
// account; global sign-out spends it with a proof signed by the account's
// identity key. The store keeps only the token's hash.
type challengeRecord struct {
	AccountID string    `cbor:"1,keyasint"`
	ExpiresAt time.Time `cbor:"2,keyasint"`
}

// PutRevokeChallenge records challenge for the account until expiresAt.
func (s *Store) PutRevokeChallenge(accountID, challenge string, expiresAt time.Time) error {
	return s.update(func(tx Tx) error {
		key := HashToken(challenge)
		rec := challengeRecord{AccountID: accountID, ExpiresAt: expiresAt}
		if err := tx.Bucket(bucketRevokeChallenges).Put(key, encode(&rec)); err != nil {
			return err
		}
		return putExpiry(tx, expiresAt, kindChallenge, key)
	})
}

// BurnRevokeChallenge spends challenge whether or not the proof that comes
// with it turns out valid: it is deleted and the deletion committed before
// this returns, so the caller verifies the proof only after the challenge can
// no longer be used again. It returns the account the challenge was issued to
// and that account's pinned identity key (nil when none is pinned). An
// unknown, expired or already spent challenge is
// error.auth.challenge_expired.
func (s *Store) BurnRevokeChallenge(challenge string) (accountID string, identityKey []byte, err error) {
	spent := fault.Errorf(fault.ECodeChallengeExpired, "the challenge is unknown, expired or already used")
	err = s.commitThenRefuse(func(tx Tx) (error, error) {
		accountID, identityKey = "", nil
		key := HashToken(challenge)
		rec, err := getRecord[challengeRecord](tx, bucketRevokeChallenges, key)
		if rec == nil || err != nil {
			return spent, err
		}
		if err := tx.Bucket(bucketRevokeChallenges).Delete(key); err != nil {
			return nil, err
		}
		if err := deleteExpiry(tx, rec.ExpiresAt, kindChallenge, key); err != nil {
			return nil, err
		}
		if !s.now().Before(rec.ExpiresAt) {
			return spent, nil
		}
		dir, err := getDirectory(tx, rec.AccountID)
		if err != nil {
			return nil, err
		}
		accountID = rec.AccountID
		if dir != nil {
			identityKey = dir.IdentityKey
		}
		return nil, nil
	})
	if err != nil {
		return "", nil, err
	}
	return accountID, identityKey, nil
}
