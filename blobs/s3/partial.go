package s3

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"sealbox/blobs"
)

// partialRecord is tus/<id>/upload: what OpenPartial needs besides the
// parts and the staging object.
type partialRecord struct {
	UploadID string `json:"upload_id"`
	Hash     string `json:"hash"`
	PartSize int64  `json:"part_size"`
}

func (s *Engine) readRecord(id string) (*partialRecord, error) { return s.readRecordKey(recordKey(id)) }

// readRecordKey reads a partial's record; nil when there is none.
func (s *Engine) readRecordKey(key string) (*partialRecord, error) {
	b, err := s.readSmall(key)
	if errors.Is(err, blobs.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rec partialRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.PartSize <= 0 || rec.UploadID == "" {
		return nil, fmt.Errorf("blobs: s3 %s is not a partial's record", key)
	}
	return &rec, nil
}

// s3Partial is a blobs.Partial as a multipart upload to blob/<hash>. Part n holds
// the bytes [(n-1)*P, n*P) for the record's part size P. The bytes past the
// last full part are in memory (buf) until Sync puts them in the staging
// object that starts at that part boundary.
//
// Staging objects are named by where they start, so a Sync whose offset
// the caller then fails to record never overwrites the staging object of
// the offset it did record: that one starts at an earlier boundary, or at
// the same one with fewer bytes (a prefix of the new ones).
type s3Partial struct {
	s     *Engine
	id    string
	rec   partialRecord
	parts []types.CompletedPart // parts 1..len, all full, in order
	buf   []byte                // buf[:n] are the bytes from base; grown as they come (grow)
	n     int64
	// completed: the upload no longer exists because a previous Complete
	// finished it; Write discards, Complete claims the stored blob.
	completed bool
	// staged lists the staging objects this partial wrote or read;
	// ackedBase is the part boundary of the offset the last Sync (or the
	// open) left, which the caller has recorded before it writes again.
	staged    []int64
	ackedBase int64
}

func (p *s3Partial) base() int64 { return int64(len(p.parts)) * p.rec.PartSize }

// OpenPartial opens partial id, for blob hash, for writing at offset, from
// the bucket alone: the longest run of full parts that ends at or before
// offset is kept (a part ending after it was never acknowledged and is
// overwritten), and the bytes from there to offset come from the staging
// object that starts there. Too few bytes is blobs.ErrPartialShort.
func (s *Engine) OpenPartial(id, hash string, offset int64) (blobs.Partial, error) {
	if !blobs.ValidPartialID(id) || strings.ContainsAny(id, "/\\") {
		return nil, fmt.Errorf("blobs: %q cannot name a partial upload", id)
	}
	if !blobs.ValidHash(hash) {
		return nil, blobs.ErrInvalidHash
	}
	rec, err := s.readRecord(id)
	if err != nil {
		return nil, err
	}
	if rec != nil && rec.Hash != hash {
		return nil, fmt.Errorf("blobs: partial %s is for blob %s, not %s", id, rec.Hash, hash)
	}
	if offset == 0 {
		return s.startPartial(id, hash, rec)
	}
	if rec == nil {
		// Completed and removed: the blob holds every byte.
		if _, serr := s.Stat(hash); serr == nil {
			return &s3Partial{s: s, id: id, rec: partialRecord{Hash: hash}, completed: true}, nil
		}
		return nil, fmt.Errorf("%w: partial %s has no upload, %d bytes acknowledged", blobs.ErrPartialShort, id, offset)
	}
	parts, err := s.listParts(*rec)
	if isNoSuchUpload(err) {
		// A Complete finished the upload, and its caller crashed before
		// recording that: the blob holds every byte.
		if _, serr := s.Stat(hash); serr == nil {
			return &s3Partial{s: s, id: id, rec: *rec, completed: true}, nil
		}
		return nil, fmt.Errorf("%w: partial %s's upload is gone", blobs.ErrPartialShort, id)
	}
	if err != nil {
		return nil, err
	}
	p := &s3Partial{s: s, id: id, rec: *rec}
	for i, part := range parts {
		if aws.ToInt32(part.PartNumber) != int32(i+1) || aws.ToInt64(part.Size) != rec.PartSize || int64(i+1)*rec.PartSize > offset {
			break
		}
		p.parts = append(p.parts, types.CompletedPart{PartNumber: part.PartNumber, ETag: part.ETag, ChecksumSHA256: part.ChecksumSHA256})
	}
	base := p.base()
	p.ackedBase = base
	if need := offset - base; need >= rec.PartSize {
		// A part every recorded offset past it implies is missing.
		p.Close()
		return nil, fmt.Errorf("%w: partial %s holds %d bytes in parts, %d acknowledged", blobs.ErrPartialShort, id, base, offset)
	} else if need > 0 {
		body, err := s.getObject(stagingKey(id, base), fmt.Sprintf("bytes=0-%d", need-1))
		if errors.Is(err, blobs.ErrNotFound) {
			p.Close()
			return nil, fmt.Errorf("%w: partial %s holds %d bytes, %d acknowledged", blobs.ErrPartialShort, id, base, offset)
		}
		if err != nil {
			p.Close()
			return nil, err
		}
		p.grow(need)
		got, err := io.ReadFull(body, p.buf[:need])
		body.Close()
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			p.Close()
			return nil, fmt.Errorf("%w: partial %s holds %d bytes, %d acknowledged", blobs.ErrPartialShort, id, base+int64(got), offset)
		}
		if err != nil {
			p.Close()
			return nil, err
		}
		p.n = need
		p.staged = append(p.staged, base)
	}
	return p, nil
}

// startPartial opens a partial at offset 0, reusing the upload of an
// existing record (its parts are overwritten in order) or starting one.
func (s *Engine) startPartial(id, hash string, rec *partialRecord) (blobs.Partial, error) {
	if rec != nil {
		if _, err := s.listParts(*rec); err == nil {
			return &s3Partial{s: s, id: id, rec: *rec}, nil
		} else if !isNoSuchUpload(err) {
			return nil, err
		}
	}
	key := blobKey(hash)
	up, err := s.client.CreateMultipartUpload(background(), &s3.CreateMultipartUploadInput{
		Bucket: &s.bucket, Key: &key, ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
	})
	if err != nil {
		return nil, s3Err("CreateMultipartUpload", key, err)
	}
	nrec := partialRecord{UploadID: *up.UploadId, Hash: hash, PartSize: s.partSize}
	b, _ := json.Marshal(nrec)
	if err := s.putObject(recordKey(id), b, false); err != nil {
		s.abortUpload(key, nrec.UploadID)
		return nil, s3Err("PutObject", recordKey(id), err)
	}
	return &s3Partial{s: s, id: id, rec: nrec}, nil
}

// PutBuffer is what a Put with maxSize holds until it sends it
// (blobs.WriteBufferer): a part, or, when maxSize bounds the blob below
// one, a buffer of maxSize+1 bytes.
func (s *Engine) PutBuffer(maxSize int64) int64 {
	if maxSize > 0 && maxSize < s.partSize-1 {
		return maxSize + 1
	}
	return s.partSize
}

// WriteBuffer is what a Partial opened at offset holds while n more bytes
// are written to it (blobs.WriteBufferer): the bytes of the part under way
// (those before offset come back from its staging object), in a buffer
// that grows as they come (grow), up to a part. It counts in this engine's
// part size; a transfer started under a larger Options.PartSize keeps
// its own parts, and may hold more.
func (s *Engine) WriteBuffer(offset, n int64) int64 {
	if n < 0 {
		return s.partSize
	}
	return partialBuffer(s.partSize, offset%s.partSize+n)
}

// partialBuffer is the buffer a partial with parts of partSize grows to
// for need bytes of a part: 64 KiB doubled until need fits, at most a
// part, so a small transfer holds little and a large one copies each byte
// at most once more as its buffer grows.
func partialBuffer(partSize, need int64) int64 {
	size := int64(64 << 10)
	for size < need && size < partSize {
		size *= 2
	}
	return min(size, partSize)
}

// grow makes the partial's buffer hold need bytes of its part (at most a
// part), keeping those it holds: a part from the pool, a smaller buffer
// of its own.
func (p *s3Partial) grow(need int64) {
	if need <= int64(len(p.buf)) {
		return
	}
	var b []byte
	if size := partialBuffer(p.rec.PartSize, need); size == p.s.partSize {
		b = *p.s.parts.Get().(*[]byte)
	} else {
		b = make([]byte, size)
	}
	copy(b, p.buf[:p.n])
	p.Close()
	p.buf = b
}

// listParts lists a partial's uploaded parts in part number order.
func (s *Engine) listParts(rec partialRecord) ([]types.Part, error) {
	key := blobKey(rec.Hash)
	var parts []types.Part
	pages := s3.NewListPartsPaginator(s.client, &s3.ListPartsInput{Bucket: &s.bucket, Key: &key, UploadId: &rec.UploadID})
	for pages.HasMorePages() {
		page, err := pages.NextPage(background())
		if err != nil {
			if isNoSuchUpload(err) {
				return nil, err
			}
			return nil, s3Err("ListParts", key, err)
		}
		parts = append(parts, page.Parts...)
	}
	slices.SortFunc(parts, func(a, b types.Part) int { return int(aws.ToInt32(a.PartNumber) - aws.ToInt32(b.PartNumber)) })
	return parts, nil
}

// Write appends b, uploading each part as soon as it is full.
func (p *s3Partial) Write(b []byte) (int, error) {
	if p.completed {
		return len(b), nil
	}
	written := 0
	for len(b) > 0 {
		p.grow(min(p.n+int64(len(b)), p.rec.PartSize))
		k := copy(p.buf[p.n:], b)
		p.n += int64(k)
		b = b[k:]
		written += k
		if p.n == p.rec.PartSize {
			part, err := p.s.uploadPart(blobKey(p.rec.Hash), p.rec.UploadID, int32(len(p.parts)+1), p.buf[:p.n])
			if err != nil {
				return written - k, err
			}
			p.parts = append(p.parts, part)
			p.n = 0
		}
	}
	return written, nil
}

// Sync puts the bytes past the last full part in the staging object that
// starts at that part's end, then deletes the staging objects no recorded
// offset can need any more: those before the boundary of the offset the
// previous Sync left, which its caller recorded before writing again.
func (p *s3Partial) Sync() error {
	if p.completed {
		return nil
	}
	base := p.base()
	if p.n > 0 {
		if err := p.s.putObject(stagingKey(p.id, base), p.buf[:p.n], false); err != nil {
			return s3Err("PutObject", stagingKey(p.id, base), err)
		}
		if !slices.Contains(p.staged, base) {
			p.staged = append(p.staged, base)
		}
	}
	kept := p.staged[:0]
	for _, start := range p.staged {
		if start >= p.ackedBase {
			kept = append(kept, start)
			continue
		}
		if err := p.s.deleteObject(stagingKey(p.id, start)); err != nil {
			return err
		}
	}
	p.staged, p.ackedBase = kept, base
	return nil
}

// Complete uploads the bytes past the last full part as the last part and
// completes the upload (If-None-Match: *); a blob already stored is claimed
// instead, as Put does.
func (p *s3Partial) Complete(hash string) (blobs.Info, error) {
	if hash != p.rec.Hash {
		return blobs.Info{}, fmt.Errorf("blobs: partial %s is for blob %s, not %s", p.id, p.rec.Hash, hash)
	}
	if p.completed {
		info, err := p.s.Stat(hash)
		if err != nil {
			return blobs.Info{}, err
		}
		info, _, err = p.s.claim(hash, info.Size, func() (bool, error) {
			return false, fmt.Errorf("%w: blob %s vanished after its partial completed", blobs.ErrPartialShort, hash)
		}, nil)
		return info, err
	}
	size := p.base() + p.n
	if size == 0 {
		info, _, err := p.s.Put(bytes.NewReader(nil), hash, 0)
		return info, err
	}
	key := blobKey(hash)
	parts := p.parts
	if p.n > 0 {
		last, err := p.s.uploadPart(key, p.rec.UploadID, int32(len(parts)+1), p.buf[:p.n])
		if err != nil {
			return blobs.Info{}, err
		}
		parts = append(slices.Clip(parts), last)
	}
	complete := func() (bool, error) { return p.s.completeUpload(key, p.rec.UploadID, parts, true) }
	created, err := complete()
	if err != nil {
		return blobs.Info{}, err
	}
	if created {
		return blobs.Info{Hash: hash, Size: size, ModTime: p.s.now()}, nil
	}
	defer p.s.abortUpload(key, p.rec.UploadID)
	info, _, err := p.s.claim(hash, size, complete, func() error {
		_, err := p.s.completeUpload(key, p.rec.UploadID, parts, false)
		return err
	})
	return info, err
}

// Close returns the part buffer; the partial's synced bytes stay.
func (p *s3Partial) Close() error {
	if p.buf != nil && int64(len(p.buf)) == p.s.partSize {
		b := p.buf
		p.s.parts.Put(&b)
	}
	p.buf = nil
	return nil
}

// PartialSize reports how many bytes partial id holds in the bucket: its
// run of full parts, or a staging object that extends one, whichever
// reaches further; a completed upload holds its whole blob. 0 when it has
// none. hash is the partial's blob, which the partial's record names too.
func (s *Engine) PartialSize(id, hash string) (int64, error) {
	rec, err := s.readRecord(id)
	if err != nil {
		return 0, err
	}
	var parts []types.Part
	if rec != nil {
		parts, err = s.listParts(*rec)
	}
	if rec == nil || isNoSuchUpload(err) {
		// Completed (or removed after completing): the blob is its bytes.
		info, err := s.Stat(hash)
		if errors.Is(err, blobs.ErrNotFound) {
			return 0, nil
		}
		return info.Size, err
	}
	if err != nil {
		return 0, err
	}
	var full int64
	for i, part := range parts {
		if aws.ToInt32(part.PartNumber) != int32(i+1) || aws.ToInt64(part.Size) != rec.PartSize {
			break
		}
		full += rec.PartSize
	}
	size := full
	err = s.list(partialPrefix(id)+"staging/", func(o types.Object) error {
		start, err := strconv.ParseInt(strings.TrimPrefix(aws.ToString(o.Key), partialPrefix(id)+"staging/"), 10, 64)
		if err == nil && start <= full && start%rec.PartSize == 0 {
			size = max(size, start+aws.ToInt64(o.Size))
		}
		return nil
	})
	return size, err
}

// RemovePartial aborts partial id's upload and deletes its objects; one
// that is already gone is not an error.
func (s *Engine) RemovePartial(id string) error {
	if !blobs.ValidPartialID(id) || strings.ContainsAny(id, "/\\") {
		return fmt.Errorf("blobs: %q cannot name a partial upload", id)
	}
	rec, err := s.readRecord(id)
	if err != nil {
		return err
	}
	if rec != nil {
		if err := s.abortUpload(blobKey(rec.Hash), rec.UploadID); err != nil {
			return err
		}
	}
	var keys []string
	if err := s.list(partialPrefix(id), func(o types.Object) error {
		keys = append(keys, aws.ToString(o.Key))
		return nil
	}); err != nil {
		return err
	}
	// The record goes last: until then a retry finds the upload to abort.
	slices.SortFunc(keys, func(a, b string) int { return strings.Compare(b, a) })
	for _, key := range keys {
		if err := s.deleteObject(key); err != nil {
			return err
		}
	}
	return nil
}

// StalePartials lists the partials none of whose objects (record, staging)
// was written since cutoff. Size is what its staging objects reach.
func (s *Engine) StalePartials(cutoff time.Time) ([]blobs.PartialInfo, error) {
	byID := map[string]*blobs.PartialInfo{}
	var ids []string
	err := s.list("tus/", func(o types.Object) error {
		rest := strings.TrimPrefix(aws.ToString(o.Key), "tus/")
		id, name, ok := strings.Cut(rest, "/")
		if !ok || !blobs.ValidPartialID(id) {
			return nil
		}
		p := byID[id]
		if p == nil {
			p = &blobs.PartialInfo{ID: id}
			byID[id] = p
			ids = append(ids, id)
		}
		if t := aws.ToTime(o.LastModified); t.After(p.ModTime) {
			p.ModTime = t
		}
		if start, ok := strings.CutPrefix(name, "staging/"); ok {
			if n, err := strconv.ParseInt(start, 10, 64); err == nil {
				p.Size = max(p.Size, n+aws.ToInt64(o.Size))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var stale []blobs.PartialInfo
	for _, id := range ids {
		if p := byID[id]; p.ModTime.Before(cutoff) {
			stale = append(stale, *p)
		}
	}
	return stale, nil
}
