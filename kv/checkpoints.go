package kv

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

// Witness cosignatures (C2SP tlog-cosignature) and what each witness has
// seen of the log live beside the last signed checkpoint, in the log's meta
// bucket, so they travel with every backup and every node reads the same:
//
//   - log_meta: "cosigned" -> CosignedCheckpoint, the newest signed
//     checkpoint a witness has cosigned, with every cosignature it has
//   - log_meta: "witnessed" -> CosignedCheckpoint, the newest that reached
//     the witness quorum
//   - log_meta: "witness/" <verifier key> -> WitnessState
var (
	logMetaCosigned  = []byte("cosigned")
	logMetaWitnessed = []byte("witnessed")
	logMetaWitness   = []byte("witness/")
)

// CosignedCheckpoint is a signed checkpoint with the witness cosignatures
// gathered for it.
type CosignedCheckpoint struct {
	Size int64     `cbor:"1,keyasint"`
	Root tlog.Hash `cbor:"2,keyasint"`
	// Note is the checkpoint as the log signed it.
	Note []byte `cbor:"3,keyasint"`
	// Cosignatures maps a witness's verifier key to its signature line
	// ("— <name> <base64>\n"), each verified before it was kept.
	Cosignatures map[string][]byte `cbor:"4,keyasint"`
}

// SignedNote is the checkpoint with its cosignature lines after the log's
// own, in the order of the witnesses' keys: one signed note that x/mod's
// note.Open verifies with the log's key alone, and a cosignature verifier
// with the witnesses'.
func (c *CosignedCheckpoint) SignedNote() []byte {
	note := bytes.Clone(c.Note)
	for _, k := range slices.Sorted(maps.Keys(c.Cosignatures)) {
		note = append(note, c.Cosignatures[k]...)
	}
	return note
}

// WitnessState is what the log knows of one witness.
type WitnessState struct {
	// Size is the tree size the witness last accepted or said it holds.
	Size int64 `cbor:"1,keyasint"`
	// Conflict, while set, says why the witness refuses this log's tree as
	// another history than the one it saw (a fork or a rollback).
	Conflict string `cbor:"2,keyasint,omitempty"`
	// Refusals counts the submissions the witness refused or never
	// answered, by reason.
	Refusals map[string]uint64 `cbor:"3,keyasint,omitempty"`
	// UpdatedAt is when the log last heard from (or failed to reach) it.
	UpdatedAt time.Time `cbor:"4,keyasint"`
	// Fault, while set, says what was wrong with the witness's last wrong
	// answer (a tree size beyond the log, a redirect, a cosignature that
	// does not verify): the witness's fault, not another history.
	Fault string `cbor:"5,keyasint,omitempty"`
}

func witnessKey(vkey string) []byte { return append(bytes.Clone(logMetaWitness), vkey...) }

// WitnessStates returns the state of every witness the log has submitted
// to, by verifier key.
func (s *Store) WitnessStates() (map[string]WitnessState, error) {
	states := map[string]WitnessState{}
	err := s.view(func(tx Tx) error {
		clear(states)
		return tx.Bucket(bucketLogMeta).Scan(prefixRange(logMetaWitness), func(k, v []byte) error {
			var st WitnessState
			if err := decode(v, &st); err != nil {
				return err
			}
			states[string(k[len(logMetaWitness):])] = st
			return nil
		})
	})
	return states, err
}

// UpdateWitnessState applies change to the state of the witness vkey (a
// zero state when there is none yet) and stamps it with the store's clock.
// change may run more than once and must only edit the state it is given.
func (s *Store) UpdateWitnessState(vkey string, change func(*WitnessState)) error {
	return s.update(func(tx Tx) error {
		st, err := getRecord[WitnessState](tx, bucketLogMeta, witnessKey(vkey))
		if err != nil {
			return err
		}
		if st == nil {
			st = &WitnessState{}
		}
		change(st)
		st.UpdatedAt = s.now()
		return tx.Bucket(bucketLogMeta).Put(witnessKey(vkey), encode(st))
	})
}

// AddCosignature keeps the verified cosignature line of the witness vkey
// on cp and records that the witness accepted cp's size, in one
// transaction. A cosignature of a checkpoint older than the newest one
// cosigned updates the witness only. Once cp holds quorum cosignatures it
// is the witnessed checkpoint; AddCosignature reports whether it is.
func (s *Store) AddCosignature(cp *LogCheckpoint, vkey string, line []byte, quorum int) (bool, error) {
	var witnessed bool
	err := s.update(func(tx Tx) error {
		witnessed = false
		meta := tx.Bucket(bucketLogMeta)
		st, err := getRecord[WitnessState](tx, bucketLogMeta, witnessKey(vkey))
		if err != nil {
			return err
		}
		if st == nil {
			st = &WitnessState{}
		}
		st.Size, st.Conflict, st.Fault, st.UpdatedAt = cp.Size, "", "", s.now()
		if err := meta.Put(witnessKey(vkey), encode(st)); err != nil {
			return err
		}
		cc, err := getRecord[CosignedCheckpoint](tx, bucketLogMeta, logMetaCosigned)
		if err != nil {
			return err
		}
		if cc != nil && cc.Size > cp.Size {
			return nil
		}
		if cc == nil || cc.Size != cp.Size || cc.Root != cp.Root {
			cc = &CosignedCheckpoint{Size: cp.Size, Root: cp.Root, Note: cp.Note}
		}
		if cc.Cosignatures == nil {
			cc.Cosignatures = map[string][]byte{}
		}
		cc.Cosignatures[vkey] = line
		if err := meta.Put(logMetaCosigned, encode(cc)); err != nil {
			return err
		}
		if len(cc.Cosignatures) < quorum {
			return nil
		}
		witnessed = true
		return meta.Put(logMetaWitnessed, encode(cc))
	})
	return witnessed, err
}

// Checkpoints returns the newest signed checkpoint, with the cosignatures
// it has gathered so far, and the newest checkpoint that reached the
// witness quorum (nil before one has). latest is nil before the first
// checkpoint is signed.
func (s *Store) Checkpoints() (latest, witnessed *CosignedCheckpoint, err error) {
	err = s.view(func(tx Tx) error {
		latest, witnessed = nil, nil
		cp, err := getRecord[LogCheckpoint](tx, bucketLogMeta, logMetaCheckpoint)
		if err != nil || cp == nil {
			return err
		}
		latest = &CosignedCheckpoint{Size: cp.Size, Root: cp.Root, Note: cp.Note}
		cc, err := getRecord[CosignedCheckpoint](tx, bucketLogMeta, logMetaCosigned)
		if err != nil {
			return err
		}
		if cc != nil && cc.Size == cp.Size && cc.Root == cp.Root {
			latest = cc
		}
		witnessed, err = getRecord[CosignedCheckpoint](tx, bucketLogMeta, logMetaWitnessed)
		return err
	})
	return latest, witnessed, err
}

// LogTreeProof proves that the log's first n records extend its first old
// ones (RFC 6962 consistency proof; empty from 0 or from n), as of one
// transaction. n must not be more than the log holds.
func (s *Store) LogTreeProof(n, old int64) (tlog.TreeProof, error) {
	var proof tlog.TreeProof
	err := s.view(func(tx Tx) error {
		size, err := logSize(tx)
		if err != nil {
			return err
		}
		if n > size || old < 0 || old > n {
			return fmt.Errorf("kv: no proof from %d to %d records in a log of %d", old, n, size)
		}
		// Every tree extends the empty one and itself: nothing to prove.
		if old == 0 || old == n {
			proof = nil
			return nil
		}
		proof, err = tlog.ProveTree(n, old, txHashes{tx.Bucket(bucketLog)})
		return err
	})
	return proof, err
}
