package kv

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// logStore opens a store holding n publishes of n accounts' directories,
// with a checkpoint saved at its size.
func logStore(tb testing.TB, n int) *Store {
	tb.Helper()
	s, err := openFile(filepath.Join(tb.TempDir(), "sealbox.db"), Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	for i := range n {
		d := &Directory{Version: 1, Bytes: []byte(fmt.Sprintf("directory %d", i)), IdentityKey: []byte("key")}
		if err := s.PublishDirectory(fmt.Sprintf("acct-%d", i), d, PublishLimit{}); err != nil {
			tb.Fatal(err)
		}
		if d.LogIndex != int64(i) {
			tb.Fatalf("publish %d got log index %d", i, d.LogIndex)
		}
	}
	tree, err := s.LogTree()
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := s.SaveCheckpoint(&LogCheckpoint{Size: tree.N, Root: tree.Hash, Note: []byte("signed")}); err != nil {
		tb.Fatal(err)
	}
	return s
}

// TestCheckLogFindsTampering: a stored hash or a record changed under the
// log is reported by CheckLog (what `sealbox check` runs); a log rolled back
// below its last signed checkpoint, or rewritten so its root changes, is
// refused by VerifyLog (what serve runs at start).
func TestCheckLogFindsTampering(t *testing.T) {
	for _, tc := range []struct {
		name      string
		tamper    func(tx Tx) error
		check     string
		verifyErr string
	}{
		{"a stored hash", func(tx Tx) error {
			b := tx.Bucket(bucketLog)
			v, err := b.Get(u64(3))
			if err != nil {
				return err
			}
			v = bytes.Clone(v)
			// Record 3 completes the subtree of records 0-3: its hashes
			// are levels 0, 1 and 2. Change the level-1 one.
			rec, hashes, _ := logEntry(v)
			hashes[tlog.HashSize] ^= 0xff
			return b.Put(u64(3), append(binary.BigEndian.AppendUint16(nil, uint16(len(rec))), append(rec, hashes...)...))
		}, "level 1 of record 3", ""},
		{"a record", func(tx Tx) error {
			b := tx.Bucket(bucketLog)
			v, err := b.Get(u64(5))
			if err != nil {
				return err
			}
			_, hashes, _ := logEntry(v)
			forged := []byte("sealbox-directory/v1 someone-else 1 00 00\n")
			return b.Put(u64(5), append(binary.BigEndian.AppendUint16(nil, uint16(len(forged))), append(forged, hashes...)...))
		}, "level 0 of record 5", ""},
		{"the whole tree", func(tx Tx) error {
			// Every record and hash rewritten: the tree is self-consistent,
			// but not the one that was signed.
			b := tx.Bucket(bucketLog)
			for n := int64(0); n < 10; n++ {
				if err := b.Delete(u64(uint64(n))); err != nil {
					return err
				}
			}
			for n := int64(0); n < 10; n++ {
				if _, err := appendLog(tx, []byte(fmt.Sprintf("forged %d\n", n))); err != nil {
					return err
				}
			}
			return nil
		}, "do not rebuild the root", "not to the root"},
		{"a rollback", func(tx Tx) error {
			for n := uint64(4); n < 10; n++ {
				if err := tx.Bucket(bucketLog).Delete(u64(n)); err != nil {
					return err
				}
			}
			return nil
		}, "last signed checkpoint has 10 records, the log 4", "fewer than the 10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := logStore(t, 10)
			if problems, err := s.CheckLog(100); err != nil || len(problems) != 0 {
				t.Fatalf("an untouched log: %v %v", problems, err)
			}
			if err := s.VerifyLog(); err != nil {
				t.Fatalf("an untouched log: %v", err)
			}
			if err := s.update(tc.tamper); err != nil {
				t.Fatal(err)
			}
			problems, err := s.CheckLog(100)
			if err != nil || !strings.Contains(strings.Join(problems, "\n"), tc.check) {
				t.Fatalf("CheckLog: %v %v, want a problem naming %q", problems, err, tc.check)
			}
			err = s.VerifyLog()
			if tc.verifyErr == "" && err != nil || tc.verifyErr != "" && (err == nil || !strings.Contains(err.Error(), tc.verifyErr)) {
				t.Fatalf("VerifyLog: %v, want %q", err, tc.verifyErr)
			}
		})
	}
}

// TestSaveCheckpointKeepsTheLargest: a smaller or equal checkpoint never
// replaces a larger one, and one that does not match the log is refused.
func TestSaveCheckpointKeepsTheLargest(t *testing.T) {
	s := logStore(t, 4)
	tree3 := func() tlog.Tree {
		var tr tlog.Tree
		s.view(func(tx Tx) (err error) {
			tr.N = 3
			tr.Hash, err = tlog.TreeHash(3, txHashes{tx.Bucket(bucketLog)})
			return err
		})
		return tr
	}()
	saved, err := s.SaveCheckpoint(&LogCheckpoint{Size: tree3.N, Root: tree3.Hash, Note: []byte("older")})
	if err != nil || saved.Size != 4 || string(saved.Note) != "signed" {
		t.Fatalf("a smaller checkpoint: %+v %v", saved, err)
	}
	if _, err := s.SaveCheckpoint(&LogCheckpoint{Size: 5, Root: tree3.Hash}); err == nil {
		t.Fatal("a checkpoint past the log was saved")
	}
}

// The publish benchmarks pair a publish that appends to the log with the
// same transaction without the append (the baseline): issue 17 allows the
// log 10%.
func BenchmarkPublishDirectoryLogged(b *testing.B) {
	benchmarkPublish(b, func(s *Store, id string, d *Directory) error { return s.PublishDirectory(id, d, PublishLimit{}) })
}

func BenchmarkPublishDirectoryUnlogged(b *testing.B) {
	benchmarkPublish(b, func(s *Store, id string, d *Directory) error {
		return s.update(func(tx Tx) error {
			if _, err := getDirectory(tx, id); err != nil {
				return err
			}
			d.PublishedAt = s.now()
			rec := directoryRecord{Version: d.Version, Bytes: d.Bytes, IdentityKey: d.IdentityKey, PublishedAt: d.PublishedAt}
			return tx.Bucket(bucketDirectories).Put([]byte(id), encode(&rec))
		})
	})
}

func benchmarkPublish(b *testing.B, publish func(*Store, string, *Directory) error) {
	s, err := openFile(filepath.Join(b.TempDir(), "sealbox.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	body := bytes.Repeat([]byte("d"), 4096)
	key := bytes.Repeat([]byte("k"), 1984)
	// A log of 10,000 records already, as on a busy server, written in one
	// transaction to keep the setup short.
	err = s.update(func(tx Tx) error {
		for i := range 10000 {
			if _, err := appendLog(tx, DirectoryLogRecord(fmt.Sprintf("warm-%d", i), 1, body, key)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := publish(s, "bench", &Directory{Version: uint64(i + 1), Bytes: body, IdentityKey: key}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLogFrontierIsBounded: the tree CheckLog rebuilds keeps only its right
// edge, one hash per level at most, and that edge still gives the root of
// the whole tree at every size; a rebuild that kept every hash (as CheckLog
// once did) held one per record and level, growing with the log.
func TestLogFrontierIsBounded(t *testing.T) {
	edge, all := logFrontier{}, treeHashes{}
	for n := int64(0); n < 5000; n++ {
		rec := fmt.Appendf(nil, "record %d\n", n)
		fresh, err := tlog.StoredHashes(n, rec, edge)
		if err != nil {
			t.Fatalf("record %d: %v", n, err)
		}
		edge.add(n, fresh)
		for i, h := range fresh {
			all[tlog.StoredHashIndex(0, n)+int64(i)] = h
		}
		if max := bits.Len64(uint64(n + 1)); len(edge) > max {
			t.Fatalf("after %d records the rebuild holds %d hashes, want at most %d", n+1, len(edge), max)
		}
		got, err := tlog.TreeHash(n+1, edge)
		if err != nil {
			t.Fatalf("root of %d records from the edge: %v", n+1, err)
		}
		if want, _ := tlog.TreeHash(n+1, all); got != want {
			t.Fatalf("root of %d records from the edge %s, from every hash %s", n+1, got, want)
		}
	}
}

// treeHashes holds every hash of a tree, for comparison.
type treeHashes map[int64]tlog.Hash

func (m treeHashes) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		out[i] = m[idx]
	}
	return out, nil
}
