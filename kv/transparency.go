package kv

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"sealbox/kv/engine"

	"golang.org/x/mod/sumdb/tlog"
)

// The transparency log of directory publishes is an RFC 6962 Merkle tree
// kept as golang.org/x/mod/sumdb/tlog stores one: every hash the tree needs,
// so a tile or a proof is a few lookups and an append computes only the
// O(log n) hashes the new record completes. Record n and the hashes written
// with it (tlog.StoredHashes: its leaf hash, then each subtree hash it
// completes, level by level) are one value under key n, so a publish adds one
// key at the end of one bucket: the fewest pages a commit writes. The log
// only grows: no method removes or rewrites a record or a hash.
var (
	// bucketLog maps a record index (8 bytes, big-endian) to the record's
	// length (2 bytes, big-endian), the record, and its stored hashes.
	bucketLog = newBucket("log")
	// bucketLogMeta holds the last signed checkpoint.
	bucketLogMeta = newBucket("log_meta")

	logMetaCheckpoint = []byte("checkpoint")
)

// DirectoryLogRecord is the one record a directory publish appends:
// "sealbox-directory/v1 <user_id> <directory_version> <sha256 of the
// directory bytes> <sha256 of the pinned identity key>\n". Nothing else about
// the account (no email, no time) enters the log.
func DirectoryLogRecord(userID string, version uint64, directory, identityKey []byte) []byte {
	return fmt.Appendf(nil, "sealbox-directory/v1 %s %d %x %x\n", userID, version, sha256.Sum256(directory), sha256.Sum256(identityKey))
}

// DirectoryResetLogRecord is the one record an operator's reset of an
// account's directory appends (sealbox users reset-directory):
// "sealbox-directory-reset/v1 <user_id> <directory_version cleared> <sha256
// of the identity key unpinned>\n". An auditor reads it as: the directory
// and pinned key this account's earlier records established end here; the
// account's next publish pins a key afresh and may start again from any
// version.
func DirectoryResetLogRecord(userID string, version uint64, identityKey []byte) []byte {
	return fmt.Appendf(nil, "sealbox-directory-reset/v1 %s %d %x\n", userID, version, sha256.Sum256(identityKey))
}

// AccountDeletedLogRecord is the one record the deletion of an account
// appends (self-service or sealbox users delete):
// "sealbox-account-deleted/v1 <user_id> <directory_version cleared> <sha256
// of the identity key unpinned>\n", version 0 and the SHA-256 of nothing for
// an account that never published. An auditor reads it as a reset that
// also ends the account: no record of this user id follows.
func AccountDeletedLogRecord(userID string, version uint64, identityKey []byte) []byte {
	return fmt.Appendf(nil, "sealbox-account-deleted/v1 %s %d %x\n", userID, version, sha256.Sum256(identityKey))
}

// logEntry splits a stored value into the record and its hashes.
func logEntry(v []byte) (record []byte, hashes []byte, ok bool) {
	if len(v) < 2 {
		return nil, nil, false
	}
	n := int(binary.BigEndian.Uint16(v))
	if len(v) < 2+n || (len(v)-2-n)%tlog.HashSize != 0 {
		return nil, nil, false
	}
	return v[2 : 2+n], v[2+n:], true
}

// txHashes reads stored hashes inside one transaction. The hash at level L,
// index m was stored with the last record it covers, ((m+1)<<L)-1, as the
// L-th of that record's hashes.
type txHashes struct{ b Bucket }

func (r txHashes) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		level, m := tlog.SplitStoredHashIndex(idx)
		v, err := r.b.Get(u64(uint64(((m + 1) << uint(level)) - 1)))
		if err != nil {
			return nil, err
		}
		_, hashes, ok := logEntry(v)
		if !ok || len(hashes) < (level+1)*tlog.HashSize {
			return nil, fmt.Errorf("kv: the transparency log has no hash at storage index %d", idx)
		}
		copy(out[i][:], hashes[level*tlog.HashSize:])
	}
	return out, nil
}

// logSize is the number of records: one more than the last key.
func logSize(tx Tx) (int64, error) {
	k, err := lastKey(tx.Bucket(bucketLog))
	if len(k) != 8 {
		return 0, err
	}
	return int64(binary.BigEndian.Uint64(k)) + 1, err
}

// appendLog appends record to the log inside tx and returns its index.
func appendLog(tx Tx, record []byte) (int64, error) {
	if len(record) > 0xffff {
		return 0, fmt.Errorf("kv: a log record of %d bytes", len(record))
	}
	b := tx.Bucket(bucketLog)
	n, err := logSize(tx)
	if err != nil {
		return 0, err
	}
	stored, err := tlog.StoredHashes(n, record, txHashes{b})
	if err != nil {
		return 0, err
	}
	v := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(record)+len(stored)*tlog.HashSize), uint16(len(record)))
	v = append(v, record...)
	for _, h := range stored {
		v = append(v, h[:]...)
	}
	// Keys only ever go at the end: full pages split nothing.
	if a, ok := b.(engine.AppendOnly); ok {
		a.AppendOnly()
	}
	return n, b.Put(u64(uint64(n)), v)
}

// LogTree returns the log's size and root hash, as of one transaction.
func (s *Store) LogTree() (tlog.Tree, error) {
	var t tlog.Tree
	err := s.view(func(tx Tx) (err error) {
		if t.N, err = logSize(tx); err != nil {
			return err
		}
		t.Hash, err = tlog.TreeHash(t.N, txHashes{tx.Bucket(bucketLog)})
		return err
	})
	return t, err
}

// ErrTileNotFound reports a tile the log is too small to hold.
var ErrTileNotFound = errors.New("kv: the log holds no such tile")

// LogTile returns a tile of height h in the tlog-tiles form: for a level of
// 0 or more the tile's hashes, for level -1 the entry bundle of its records
// (each a big-endian uint16 length and the record). A tile (full, or partial
// of width W) exists once the tree holds everything it covers; its bytes
// never change after.
func (s *Store) LogTile(t tlog.Tile) ([]byte, error) {
	var data []byte
	// The tile's first index, N<<H, must be an int64: a larger N lies past
	// any tree, and shifted anyway it wraps round to a tile that does exist.
	if t.N < 0 || t.N > math.MaxInt64>>uint(t.H)-1 {
		return nil, ErrTileNotFound
	}
	err := s.view(func(tx Tx) error {
		width := int64(t.W)
		start := t.N << uint(t.H)
		size, err := logSize(tx)
		if err != nil {
			return err
		}
		if t.L < 0 {
			if start+width > size {
				return ErrTileNotFound
			}
			log := tx.Bucket(bucketLog)
			for i := start; i < start+width; i++ {
				v, err := log.Get(u64(uint64(i)))
				if err != nil {
					return err
				}
				rec, _, ok := logEntry(v)
				if !ok {
					return fmt.Errorf("kv: the transparency log's record %d is missing", i)
				}
				data = binary.BigEndian.AppendUint16(data, uint16(len(rec)))
				data = append(data, rec...)
			}
			return nil
		}
		// A hash at tree level k with index i is complete when the tree
		// holds records up to (i+1)<<k; the tile's last index is
		// start+width-1, at tree level H*L.
		if k := uint(t.H * t.L); k >= 63 || start+width > size>>k {
			return ErrTileNotFound
		}
		data, err = tlog.ReadTileData(t, txHashes{tx.Bucket(bucketLog)})
		return err
	})
	return data, err
}

// LogCheckpoint is a signed checkpoint of the log, kept so that a restart
// serves it without signing again and so that the tree can be proven, at
// every start, to extend what was signed.
type LogCheckpoint struct {
	Size int64     `cbor:"1,keyasint"`
	Root tlog.Hash `cbor:"2,keyasint"`
	Note []byte    `cbor:"3,keyasint"`
}

// LastCheckpoint returns the largest checkpoint saved, or nil before the
// first.
func (s *Store) LastCheckpoint() (*LogCheckpoint, error) {
	var cp *LogCheckpoint
	err := s.view(func(tx Tx) (err error) {
		cp, err = getRecord[LogCheckpoint](tx, bucketLogMeta, logMetaCheckpoint)
		return err
	})
	return cp, err
}

// SaveCheckpoint keeps cp when it is larger than the one saved and its root
// is the tree's at its size; it returns the checkpoint saved afterwards,
// which another node may have made larger meanwhile.
func (s *Store) SaveCheckpoint(cp *LogCheckpoint) (*LogCheckpoint, error) {
	saved := cp
	err := s.update(func(tx Tx) error {
		saved = cp
		old, err := getRecord[LogCheckpoint](tx, bucketLogMeta, logMetaCheckpoint)
		if err != nil {
			return err
		}
		if old != nil && old.Size >= cp.Size {
			saved = old
			return nil
		}
		size, err := logSize(tx)
		if err != nil {
			return err
		}
		if cp.Size > size {
			return fmt.Errorf("kv: a checkpoint of size %d does not match the log", cp.Size)
		}
		root, err := tlog.TreeHash(cp.Size, txHashes{tx.Bucket(bucketLog)})
		if err != nil {
			return err
		}
		if root != cp.Root {
			return fmt.Errorf("kv: a checkpoint of size %d does not match the log", cp.Size)
		}
		return tx.Bucket(bucketLogMeta).Put(logMetaCheckpoint, encode(cp))
	})
	return saved, err
}

// VerifyLog proves that the log extends the last checkpoint it signed: it is
// at least as large, and its first Size records still hash to the signed
// root. A log that fails this was truncated or rewritten, and the server
// must not sign anything on top of it.
func (s *Store) VerifyLog() error {
	cp, err := s.LastCheckpoint()
	if err != nil || cp == nil {
		return err
	}
	return s.view(func(tx Tx) error {
		size, err := logSize(tx)
		if err != nil {
			return err
		}
		if size < cp.Size {
			return fmt.Errorf("the transparency log holds %d records, fewer than the %d of its last signed checkpoint: the store was rolled back or replaced", size, cp.Size)
		}
		root, err := tlog.TreeHash(cp.Size, txHashes{tx.Bucket(bucketLog)})
		if err != nil {
			return fmt.Errorf("the transparency log cannot rebuild its last signed checkpoint: %w", err)
		}
		if root != cp.Root {
			return fmt.Errorf("the transparency log's first %d records hash to %s, not to the root %s it signed: the log was rewritten", cp.Size, root, cp.Root)
		}
		return nil
	})
}

// CheckLog recomputes every stored hash of the log from its records and
// reports each that differs, a record or hash that is missing, and a last
// signed checkpoint the stored hashes do not rebuild.
func (s *Store) CheckLog(max int) ([]string, error) {
	var problems []string
	report := func(format string, args ...any) {
		if len(problems) < max {
			problems = append(problems, "transparency log: "+fmt.Sprintf(format, args...))
		}
	}
	err := s.view(func(tx Tx) error {
		size, err := logSize(tx)
		if err != nil {
			return err
		}
		log := tx.Bucket(bucketLog)
		// The tree recomputed from the records alone, in memory: only its
		// right edge, which is all the next record's hashes need.
		rebuilt := logFrontier{}
		for n := int64(0); n < size; n++ {
			v, err := log.Get(u64(uint64(n)))
			if err != nil {
				return err
			}
			rec, hashes, ok := logEntry(v)
			if !ok {
				report("record %d is missing or malformed", n)
				return nil
			}
			fresh, err := tlog.StoredHashes(n, rec, rebuilt)
			if err != nil {
				return err
			}
			rebuilt.add(n, fresh)
			for i, h := range fresh {
				if i*tlog.HashSize >= len(hashes) || !bytes.Equal(hashes[i*tlog.HashSize:(i+1)*tlog.HashSize], h[:]) {
					report("the stored hash at level %d of record %d is not the hash of the records", i, n)
				}
			}
		}
		cp, err := getRecord[LogCheckpoint](tx, bucketLogMeta, logMetaCheckpoint)
		if err != nil {
			return err
		}
		if cp != nil {
			if cp.Size > size {
				report("the last signed checkpoint has %d records, the log %d", cp.Size, size)
				return nil
			}
			root, err := tlog.TreeHash(cp.Size, txHashes{log})
			if err != nil || root != cp.Root {
				report("the stored hashes do not rebuild the root of the last signed checkpoint (size %d)", cp.Size)
			}
		}
		return nil
	})
	return problems, err
}

// logFrontier is the right edge of a tree being rebuilt record by record:
// the root of each complete subtree of the records so far (at most one per
// level), the only hashes tlog.StoredHashes reads for the next record. It
// holds at most 64 hashes however long the log, where keeping every hash
// would grow with it.
type logFrontier map[int64]tlog.Hash

// add records the hashes record n completed (tlog.StoredHashes(n, ...)) and
// forgets those no longer on the edge of the tree of n+1 records.
func (f logFrontier) add(n int64, fresh []tlog.Hash) {
	for i, h := range fresh {
		f[tlog.StoredHashIndex(0, n)+int64(i)] = h
	}
	size := n + 1
	edge := make(map[int64]bool, 64)
	for level := 0; size>>level > 0; level++ {
		if size>>level&1 == 1 {
			edge[tlog.StoredHashIndex(level, size>>level-1)] = true
		}
	}
	for idx := range f {
		if !edge[idx] {
			delete(f, idx)
		}
	}
}

func (f logFrontier) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		h, ok := f[idx]
		if !ok {
			return nil, fmt.Errorf("kv: no hash at storage index %d", idx)
		}
		out[i] = h
	}
	return out, nil
}
