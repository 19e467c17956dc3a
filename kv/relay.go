package kv

import (
	"bytes"
	"cmp"
	"errors"
	"time"

	"sealbox/kv/fault"
)

// The enrollment relay: an authenticated device issues a code with two
// spellings (the full code and a short numeric fallback); an unauthenticated
// device redeems either spelling once for a channel with two mailboxes.
// Codes, fallbacks and channel handles are bearer secrets: only their
// SHA-256 is stored.

// Direction names one of a channel's two mailboxes.
type Direction byte

const (
	ToInitiator Direction = 0
	ToEnrollee  Direction = 1
)

type enrollCodeRecord struct {
	AccountID    string    `cbor:"1,keyasint"`
	ExpiresAt    time.Time `cbor:"2,keyasint"`
	FallbackHash []byte    `cbor:"3,keyasint"`
}

// ErrFallbackTaken reports that a new code's numeric fallback equals the
// fallback of a live code. The space is 10^12, so this is rare enough that
// the caller simply fails the request rather than retry; writing it anyway
// would let one spelling redeem another account's code.
var ErrFallbackTaken = errors.New("kv: the enrollment fallback is held by a live code")

// IssueEnrollmentCode records code and its fallback spelling for the account
// until expiresAt. Both are kept as SHA-256 only; a spelling from a space
// small enough to enumerate should reach the store already keyed (the
// server passes its numeric fallback through an HMAC).
func (s *Store) IssueEnrollmentCode(accountID, code, fallback string, expiresAt time.Time) error {
	return s.update(func(tx Tx) error {
		now := s.now()
		key, fkey := HashToken(code), HashToken(fallback)
		held, err := tx.Bucket(bucketEnrollFallbacks).Get(fkey)
		if err != nil {
			return err
		}
		if held != nil {
			heldKey := copyBytes(held)
			rec, err := getEnrollCode(tx, heldKey)
			if err != nil {
				return err
			}
			if rec != nil && now.Before(rec.ExpiresAt) {
				return ErrFallbackTaken
			}
			if err := deleteEnrollCode(tx, heldKey, rec); err != nil {
				return err
			}
		}
		rec := enrollCodeRecord{AccountID: accountID, ExpiresAt: expiresAt, FallbackHash: fkey}
		if err := tx.Bucket(bucketEnrollCodes).Put(key, encode(&rec)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketEnrollFallbacks).Put(fkey, key); err != nil {
			return err
		}
		return putExpiry(tx, expiresAt, kindEnrollCode, key)
	})
}

func getEnrollCode(tx Tx, key []byte) (*enrollCodeRecord, error) {
	return getRecord[enrollCodeRecord](tx, bucketEnrollCodes, key)
}

// deleteEnrollCode removes a code and both of its spellings (nothing when
// rec is nil). The fallback entry is removed only while it still points at
// this code, so sweeping a stale code never unlinks a newer code's fallback.
func deleteEnrollCode(tx Tx, key []byte, rec *enrollCodeRecord) error {
	if rec == nil {
		return nil
	}
	fallbacks := tx.Bucket(bucketEnrollFallbacks)
	if held, err := fallbacks.Get(rec.FallbackHash); err != nil {
		return err
	} else if bytes.Equal(held, key) {
		if err := fallbacks.Delete(rec.FallbackHash); err != nil {
			return err
		}
	}
	if err := tx.Bucket(bucketEnrollCodes).Delete(key); err != nil {
		return err
	}
	return deleteExpiry(tx, rec.ExpiresAt, kindEnrollCode, key)
}

// channelRecord is a relay channel opened by redeeming a code. AccountID is
// the account that issued the code: the only one that may close the channel.
// Each channel is also listed under its account in
// relay_channels_by_account (idPart(account)|channel key), so the caps of
// an account read its few channels by a prefix scan.
type channelRecord struct {
	AccountID string    `cbor:"1,keyasint"`
	ExpiresAt time.Time `cbor:"2,keyasint"`
	// Count is how many payloads wait in each mailbox; Next is the sequence
	// number the next payload of each mailbox takes, so a mailbox is read in
	// arrival order by a prefix scan.
	Count [2]int    `cbor:"3,keyasint"`
	Next  [2]uint64 `cbor:"4,keyasint"`
	// Bytes is how many payload bytes wait in each mailbox.
	Bytes [2]int64 `cbor:"5,keyasint,omitempty"`
}

// RelayLimits bound the relay. MailboxCapacity is the payloads one mailbox
// holds (beyond: error.relay.mailbox_full); Channels the live channels one
// account may have open and Bytes the payload bytes waiting, undrained, in
// all of them (beyond either: a limit refusal naming the flag, with the wait
// until one of the account's channels expires). Zero is no limit.
type RelayLimits struct {
	MailboxCapacity int
	Channels        int
	Bytes           int64
}

// Limit codes and flag names of the relay's per-account caps.
const (
	LimitRelayChannels = "relay-channels"
	LimitRelayBytes    = "relay-bytes"
)

// relayUsage is what an account's live channels hold: how many there are,
// the payload bytes waiting in them, and the soonest a channel expires (or,
// with bytes waiting, the soonest one that holds bytes does), after which
// waiting may have freed room.
type relayUsage struct {
	channels int
	bytes    int64
	freedAt  time.Time
}

// accountRelay sums the account's live channels. It reads one index entry
// and one record per channel: the channel cap keeps the live ones few, and
// the sweep removes expired ones within a sweep interval of their expiry.
// No per-account counter row is written, so the writers of different
// channels of one account conflict only through these reads.
func accountRelay(tx Tx, accountID string, now time.Time) (relayUsage, error) {
	var u relayUsage
	err := scanPrefix(tx.Bucket(bucketRelayChannelsByAccount), idPart(accountID), func(k, _ []byte) error {
		ch, err := getRecord[channelRecord](tx, bucketRelayChannels, k[len(accountID)+1:])
		if err != nil || ch == nil || reached(ch.ExpiresAt, now) {
			return err
		}
		u.channels++
		u.bytes += ch.Bytes[0] + ch.Bytes[1]
		if u.freedAt.IsZero() || ch.ExpiresAt.Before(u.freedAt) {
			u.freedAt = ch.ExpiresAt
		}
		return nil
	})
	return u, err
}

// RedeemEnrollmentCode spends a code by either spelling (fallback tells
// which one spelling is) and opens a channel for the account that issued the
// code, until channelExpiresAt, returning its handle: channelFor(the
// SHA-256 of the full code), so that the issuer, who holds the full code,
// can find the same channel (EnrollmentChannel) whichever spelling was
// redeemed. Both spellings are spent together. An unknown, expired or spent
// code, or one of a disabled account, is error.enrollment.code_refused.
func (s *Store) RedeemEnrollmentCode(spelling string, fallback bool, channelFor func(codeKey []byte) string, channelExpiresAt time.Time, lim RelayLimits) (string, error) {
	var channelID string
	return channelID, s.update(func(tx Tx) error {
		now := s.now()
		channelID = ""
		refused := fault.Errorf(fault.ECodeEnrollmentCodeRefused, "the code is unknown, expired or already used")
		key := HashToken(spelling)
		if fallback {
			held, err := tx.Bucket(bucketEnrollFallbacks).Get(key)
			if held == nil || err != nil {
				return cmp.Or(err, error(refused))
			}
			key = copyBytes(held)
		}
		rec, err := getEnrollCode(tx, key)
		if err != nil {
			return err
		}
		if rec == nil || !now.Before(rec.ExpiresAt) {
			return refused
		}
		if active, err := ownerActive(tx, rec.AccountID); err != nil || !active {
			return cmp.Or(err, error(refused))
		}
		if lim.Channels > 0 {
			u, err := accountRelay(tx, rec.AccountID, now)
			if err != nil {
				return err
			}
			if u.channels >= lim.Channels {
				return fault.LimitErrorf(fault.ECodeLimitRelayChannels, LimitRelayChannels, u.freedAt.Sub(now),
					"the account has %d relay channels open; one must expire or be closed first", u.channels)
			}
		}
		if err := deleteEnrollCode(tx, key, rec); err != nil {
			return err
		}
		channelID = channelFor(key)
		ch := channelRecord{AccountID: rec.AccountID, ExpiresAt: channelExpiresAt}
		return putChannel(tx, HashToken(channelID), &ch, true)
	})
}

// EnrollmentChannel returns when the live channel channelID expires, when
// the account accountID issued its code. Before the code is redeemed, after
// the channel expired or closed, and for another account's channel, it is
// error.relay.channel_not_found, the same for each.
func (s *Store) EnrollmentChannel(accountID, channelID string) (time.Time, error) {
	var expiresAt time.Time
	err := s.view(func(tx Tx) error {
		ch, err := liveChannel(tx, HashToken(channelID), s.now())
		if err != nil {
			return err
		}
		if ch.AccountID != accountID {
			return errChannelNotFound()
		}
		expiresAt = ch.ExpiresAt
		return nil
	})
	return expiresAt, err
}

func putChannel(tx Tx, key []byte, ch *channelRecord, isNew bool) error {
	if err := tx.Bucket(bucketRelayChannels).Put(key, encode(ch)); err != nil {
		return err
	}
	if !isNew {
		return nil
	}
	if err := tx.Bucket(bucketRelayChannelsByAccount).Put(join(idPart(ch.AccountID), key), member); err != nil {
		return err
	}
	return putExpiry(tx, ch.ExpiresAt, kindChannel, key)
}

// liveChannel returns the channel a handle names, or
// error.relay.channel_not_found when it is unknown or expired, or the
// account that opened it is disabled.
func liveChannel(tx Tx, key []byte, now time.Time) (*channelRecord, error) {
	ch, err := getRecord[channelRecord](tx, bucketRelayChannels, key)
	if err != nil {
		return nil, err
	}
	if ch == nil || reached(ch.ExpiresAt, now) {
		return nil, errChannelNotFound()
	}
	if active, err := ownerActive(tx, ch.AccountID); err != nil || !active {
		return nil, cmp.Or(err, errChannelNotFound())
	}
	return ch, nil
}

// errChannelNotFound is the one answer for a handle that is unknown, expired,
// closed or another account's, so none of them can be told apart.
func errChannelNotFound() error {
	return fault.Errorf(fault.ECodeRelayChannelNotFound, "channel not found")
}

func mailboxPrefix(key []byte, dir Direction) []byte {
	return join(key, []byte{byte(dir)})
}

// AppendRelay appends payload to one mailbox of a live channel. A mailbox
// that already holds lim.MailboxCapacity payloads refuses with
// error.relay.mailbox_full; a payload that would take the bytes waiting in
// all of the account's channels past lim.Bytes refuses with a limit
// refusal. Posts to concurrent channels are committed together
// (commitBatched).
func (s *Store) AppendRelay(channelID string, dir Direction, payload []byte, lim RelayLimits) error {
	return s.commitBatched(nil, func(tx Tx) (error, error) {
		now := s.now()
		key := HashToken(channelID)
		ch, err := liveChannel(tx, key, now)
		if err != nil {
			return asRefusal(err)
		}
		if lim.MailboxCapacity > 0 && ch.Count[dir] >= lim.MailboxCapacity {
			return fault.Errorf(fault.ECodeRelayMailboxFull, "the mailbox holds %d payloads; drain it first", lim.MailboxCapacity), nil
		}
		if lim.Bytes > 0 {
			u, err := accountRelay(tx, ch.AccountID, now)
			if err != nil {
				return nil, err
			}
			if u.bytes+int64(len(payload)) > lim.Bytes {
				return fault.LimitErrorf(fault.ECodeLimitRelayBytes, LimitRelayBytes, u.freedAt.Sub(now),
					"the account's relay channels hold %d undrained bytes, and at most %d may wait; drain them first", u.bytes, lim.Bytes), nil
			}
		}
		if err := tx.Bucket(bucketRelayMailboxes).Put(join(mailboxPrefix(key, dir), u64(ch.Next[dir])), payload); err != nil {
			return nil, err
		}
		ch.Count[dir]++
		ch.Next[dir]++
		ch.Bytes[dir] += int64(len(payload))
		return nil, putChannel(tx, key, ch, false)
	})
}

// DrainRelay removes and returns every payload of one mailbox of a live
// channel, in arrival order; the other mailbox is untouched. Drains of
// concurrent channels are committed together (commitBatched).
func (s *Store) DrainRelay(channelID string, dir Direction) ([][]byte, error) {
	var out [][]byte
	err := s.commitBatched(nil, func(tx Tx) (error, error) {
		out = nil
		key := HashToken(channelID)
		ch, err := liveChannel(tx, key, s.now())
		if err != nil {
			return asRefusal(err)
		}
		out, err = deleteMailbox(tx, mailboxPrefix(key, dir))
		if err != nil {
			return nil, err
		}
		ch.Count[dir], ch.Bytes[dir] = 0, 0
		return nil, putChannel(tx, key, ch, false)
	})
	return out, err
}

// deleteMailbox removes the payloads under prefix and returns copies of them
// in key (arrival) order.
func deleteMailbox(tx Tx, prefix []byte) ([][]byte, error) {
	var keys, payloads [][]byte
	err := scanPrefix(tx.Bucket(bucketRelayMailboxes), prefix, func(k, v []byte) error {
		keys = append(keys, copyBytes(k))
		payloads = append(payloads, copyBytes(v))
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if err := tx.Bucket(bucketRelayMailboxes).Delete(k); err != nil {
			return nil, err
		}
	}
	return payloads, nil
}

// deleteChannel removes a channel and both of its mailboxes.
func deleteChannel(tx Tx, key []byte, ch *channelRecord) error {
	for _, dir := range []Direction{ToInitiator, ToEnrollee} {
		if _, err := deleteMailbox(tx, mailboxPrefix(key, dir)); err != nil {
			return err
		}
	}
	if err := tx.Bucket(bucketRelayChannels).Delete(key); err != nil {
		return err
	}
	if err := tx.Bucket(bucketRelayChannelsByAccount).Delete(join(idPart(ch.AccountID), key)); err != nil {
		return err
	}
	return deleteExpiry(tx, ch.ExpiresAt, kindChannel, key)
}

// CloseChannel closes a live channel and drops both mailboxes. Only the
// account that issued the code may; for any other account the channel does
// not exist (error.relay.channel_not_found, as for an unknown handle).
func (s *Store) CloseChannel(accountID, channelID string) error {
	return s.update(func(tx Tx) error {
		key := HashToken(channelID)
		ch, err := liveChannel(tx, key, s.now())
		if err != nil {
			return err
		}
		if ch.AccountID != accountID {
			return errChannelNotFound()
		}
		return deleteChannel(tx, key, ch)
	})
}
