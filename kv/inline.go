package kv

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
)

// A blob at or under the server's inline threshold is kept in the store
// itself instead of as a file of the blob engine:
//
//   - inline_blobs: hash -> the blob's bytes, written in the transaction that
//     records the blob (holdBlob, when the caller passes Blob.Data), so the
//     op or upload that brings it costs no file creation and no fsync of
//     its own: the bytes are durable when the transaction is.
//
// The blob's record says which kind it is (blobRecord.Inline); reads,
// quota, holdings, check and backup treat both kinds alike, and an inline
// blob travels in the store's snapshot. An inline blob, like a file, lives
// as long as its record: releaseBlob, which deletes the record of a blob
// nobody holds any more, deletes its inline bytes in the same transaction. A file the blob engine keeps of an inline blob is a
// leftover that gc collects (BlobsRecorded).

// putInline keeps b.Data as the bytes of blob b.
func putInline(tx Tx, b Blob) error {
	if int64(len(b.Data)) != b.Size {
		return fmt.Errorf("kv: inline blob %s has %d bytes, %d declared", b.Hash, len(b.Data), b.Size)
	}
	return tx.Bucket(bucketInlineBlobs).Put([]byte(b.Hash), b.Data)
}

// InlineBlob returns a copy of the bytes of the blob the store keeps
// inline, or nil, nil when it keeps none under hash.
func (s *Store) InlineBlob(hash string) ([]byte, error) {
	var data []byte
	err := s.view(func(tx Tx) error {
		v, err := tx.Bucket(bucketInlineBlobs).Get([]byte(hash))
		data = copyBytes(v)
		return err
	})
	return data, err
}

// InlineProblems describes what is wrong with the inline blobs (at most
// limit problems): a blob recorded inline whose bytes are missing or of
// another size than recorded, bytes kept inline for a blob not recorded as
// inline, and, when deep, bytes that no longer hash to their name. It reads
// one page of records at a time.
func (s *Store) InlineProblems(deep bool, limit int) ([]string, error) {
	var problems []string
	report := func(format string, args ...any) error {
		if len(problems) >= limit {
			return ErrStopScan
		}
		problems = append(problems, fmt.Sprintf(format, args...))
		return nil
	}
	err := s.view(func(tx Tx) error {
		problems = nil
		inline := tx.Bucket(bucketInlineBlobs)
		err := scanPages(tx.Bucket(bucketBlobs), func(k, v []byte) error {
			var rec blobRecord
			if err := decode(v, &rec); err != nil || !rec.Inline {
				return err
			}
			data, err := inline.Get(k)
			switch {
			case err != nil:
				return err
			case data == nil:
				return report("blob %s: recorded inline but its bytes are missing from the store", k)
			case int64(len(data)) != rec.Size:
				return report("blob %s: %d bytes kept inline, %d recorded", k, len(data), rec.Size)
			case deep && address(data) != string(k):
				return report("blob %s: its inline bytes no longer hash to its name", k)
			}
			return nil
		})
		if err != nil {
			return err
		}
		return scanPages(inline, func(k, _ []byte) error {
			rec, err := getRecord[blobRecord](tx, bucketBlobs, k)
			if err != nil || rec != nil && rec.Inline {
				return err
			}
			return report("blob %s: kept inline but not recorded as an inline blob", k)
		})
	})
	if errors.Is(err, ErrStopScan) {
		err = nil
	}
	return problems, err
}

// address is a blob's content address: the lowercase hex SHA-256 of its
// bytes, as the blob engine names its files.
func address(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// FileBlobs is what moving blobs inline needs of the blob engine, which kv
// does not import (cli adapts it).
type FileBlobs interface {
	// Read returns the bytes of the blob's file, expected to be size bytes,
	// or nil, nil when there is no such file.
	Read(hash string, size int64) ([]byte, error)
	// Remove removes the blob's file; a file already gone is no error.
	Remove(hash string) error
}

// metaInlineMoved holds, as decimal text, the threshold the last complete
// MoveInline ran with: a start with the same threshold has nothing to move.
var metaInlineMoved = []byte("inline_moved")

// moveBatch is how many blobs MoveInline copies per transaction.
const moveBatch = 256

// MoveInline brings the blob files of at most maxSize bytes into the store
// (the move that completes format 6), a batch at a time: it reads a batch
// of files, keeps their bytes inline and marks their records inline in one
// transaction, and only after that commits removes the files. A crash in
// between leaves a blob in both places, which is harmless: reads use the
// inline bytes, gc collects the file, and the next run skips the blob. A
// file that is missing or whose bytes do not hash to its name stays as it
// is, for check to report. A run with the threshold of the last complete
// one returns at once. It reports how many blobs it moved.
func (s *Store) MoveInline(files FileBlobs, maxSize int64) (int, error) {
	threshold := []byte(strconv.FormatInt(maxSize, 10))
	var done bool
	err := s.view(func(tx Tx) error {
		v, err := tx.Bucket(bucketMeta).Get(metaInlineMoved)
		done = string(v) == string(threshold)
		return err
	})
	if err != nil || done || maxSize <= 0 {
		return 0, err
	}
	moved, after := 0, ""
	for {
		page, err := s.Blobs(after, moveBatch)
		if err != nil {
			return moved, err
		}
		n, err := s.moveInlinePage(files, page, maxSize)
		moved += n
		if err != nil {
			return moved, err
		}
		if len(page) < moveBatch {
			break
		}
		after = page[len(page)-1].Hash
	}
	return moved, s.update(func(tx Tx) error { return tx.Bucket(bucketMeta).Put(metaInlineMoved, threshold) })
}

// moveInlinePage moves the blobs of page that are files of at most maxSize
// bytes.
func (s *Store) moveInlinePage(files FileBlobs, page []Blob, maxSize int64) (int, error) {
	var batch []Blob
	for _, b := range page {
		if b.Inline || b.Size > maxSize {
			continue
		}
		data, err := readFile(files, b)
		if err != nil {
			return 0, err
		}
		if data != nil {
			b.Data = data
			batch = append(batch, b)
		}
	}
	if len(batch) == 0 {
		return 0, nil
	}
	var moved []string
	err := s.update(func(tx Tx) error {
		moved = nil
		for _, b := range batch {
			rec, err := getRecord[blobRecord](tx, bucketBlobs, []byte(b.Hash))
			if err != nil {
				return err
			}
			if rec == nil || rec.Inline {
				continue
			}
			rec.Inline = true
			if err := putInline(tx, b); err != nil {
				return err
			}
			if err := tx.Bucket(bucketBlobs).Put([]byte(b.Hash), encode(rec)); err != nil {
				return err
			}
			moved = append(moved, b.Hash)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, h := range moved {
		if err := files.Remove(h); err != nil {
			return len(moved), fmt.Errorf("remove blob file %s, now kept inline: %w", h, err)
		}
	}
	return len(moved), nil
}

// readFile reads the file of blob b, or returns nil, nil when it is
// missing or its bytes are not the blob's (check reports both).
func readFile(files FileBlobs, b Blob) ([]byte, error) {
	data, err := files.Read(b.Hash, b.Size)
	if err != nil {
		return nil, fmt.Errorf("read blob file %s: %w", b.Hash, err)
	}
	if int64(len(data)) != b.Size || address(data) != b.Hash {
		return nil, nil
	}
	return data, nil
}
