package s3

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"sealbox/blobs"
)

// Collect removes the blob if it was written before cutoff and no Put
// claimed it since (blobs.Engine.Collect). It copies the blob aside,
// deletes it, and only then reads the claim: a Put that found the blob
// stored wrote its claim before looking for the blob, so either this read
// sees the claim (and the blob is copied back) or the Put's look finds the
// blob gone (and the Put places it again). Cutoff is on the clock of the
// claims (Options.Now).
func (s *Engine) Collect(hash string, cutoff time.Time) (bool, error) {
	info, err := s.Stat(hash)
	if err != nil || !info.ModTime.Before(cutoff) {
		return false, err
	}
	if claimed, err := s.claimedSince(hash, cutoff); err != nil || claimed {
		return false, err
	}
	key, aside := blobKey(hash), asideKey(hash)
	if err := s.copyObject(key, aside, info.Size, false); err != nil {
		return false, err
	}
	s.step("aside")
	if err := s.deleteObject(key); err != nil {
		return false, err
	}
	s.step("deleted")
	claimed, err := s.claimedSince(hash, cutoff)
	if claimed || err != nil {
		// Unsure or claimed: put it back, unless a Put already did.
		if cerr := s.copyObject(aside, key, info.Size, true); cerr != nil && !isPreconditionFailed(cerr) {
			return false, errors.Join(err, cerr)
		}
		return false, errors.Join(err, s.deleteObject(aside))
	}
	if err := s.deleteObject(aside); err != nil {
		return true, err
	}
	return true, s.deleteObject(claimKey(hash))
}

// copyObject copies src (size bytes) to dst, with If-None-Match: * when
// ifAbsent (a 412 is returned as is), in parts when S3 cannot copy it in
// one request.
//
// A conditional copy is always a multipart copy completed with
// If-None-Match: *, never a CopyObject with it: versitygw v1.8.0 ignores
// If-None-Match on CopyObject (it reads only the x-amz-copy-source-if-*
// headers) and would replace the object, while every server tested honours
// it on CompleteMultipartUpload. It costs two more requests, on the rare
// path of a Collect that puts a claimed blob back.
func (s *Engine) copyObject(src, dst string, size int64, ifAbsent bool) error {
	source := s.bucket + "/" + src
	var ifNoneMatch *string
	if ifAbsent {
		ifNoneMatch = aws.String("*")
	}
	switch {
	case size == 0:
		// No range to copy: the bytes are known.
		err := s.putObject(dst, nil, ifAbsent)
		if isPreconditionFailed(err) {
			return err
		}
		return s3Err("PutObject", dst, err)
	case size <= s.copySize && !ifAbsent:
		_, err := s.client.CopyObject(background(), &s3.CopyObjectInput{Bucket: &s.bucket, Key: &dst, CopySource: &source})
		return s3Err("CopyObject", src, err)
	}
	up, err := s.client.CreateMultipartUpload(background(), &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: &dst})
	if err != nil {
		return s3Err("CreateMultipartUpload", dst, err)
	}
	defer s.abortUpload(dst, *up.UploadId)
	var parts []types.CompletedPart
	for off := int64(0); off < size; off += s.copySize {
		n := int32(len(parts) + 1)
		rng := fmt.Sprintf("bytes=%d-%d", off, min(off+s.copySize, size)-1)
		out, err := s.client.UploadPartCopy(background(), &s3.UploadPartCopyInput{
			Bucket: &s.bucket, Key: &dst, UploadId: up.UploadId, PartNumber: &n, CopySource: &source, CopySourceRange: &rng,
		})
		if err != nil {
			return s3Err("UploadPartCopy", src, err)
		}
		parts = append(parts, types.CompletedPart{PartNumber: &n, ETag: out.CopyPartResult.ETag})
	}
	_, err = s.client.CompleteMultipartUpload(background(), &s3.CompleteMultipartUploadInput{
		Bucket: &s.bucket, Key: &dst, UploadId: up.UploadId, IfNoneMatch: ifNoneMatch,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	if isPreconditionFailed(err) {
		return err
	}
	return s3Err("CompleteMultipartUpload", dst, err)
}

// Remove deletes the blob. It returns blobs.ErrInvalidHash or blobs.ErrNotFound.
func (s *Engine) Remove(hash string) error {
	if _, err := s.Stat(hash); err != nil {
		return err
	}
	return s.deleteObject(blobKey(hash))
}

// list calls fn for every object under prefix, in key order, a page of
// ListObjectsV2 at a time.
func (s *Engine) list(prefix string, fn func(types.Object) error) error {
	pages := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &prefix})
	for pages.HasMorePages() {
		page, err := pages.NextPage(background())
		if err != nil {
			return s3Err("ListObjectsV2", prefix, err)
		}
		for _, o := range page.Contents {
			if err := fn(o); err != nil {
				return err
			}
		}
	}
	return nil
}

// Walk calls fn for every stored blob, in hash order, listing the bucket a
// page at a time, and stops at the first error fn returns. ModTime is the
// store's LastModified.
func (s *Engine) Walk(fn func(blobs.Info) error) error {
	return s.list("blob/", func(o types.Object) error {
		hash := strings.TrimPrefix(aws.ToString(o.Key), "blob/")
		if !blobs.ValidHash(hash) {
			return nil
		}
		return fn(blobs.Info{Hash: hash, Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)})
	})
}

// CleanTemp removes what interrupted work left before olderThan: multipart
// uploads that no partial's record names (a Put cut off by a crash, an
// abandoned record's predecessor), and claim, aside and probe objects.
func (s *Engine) CleanTemp(olderThan time.Time) (int, error) {
	stale, err := s.staleTemp(olderThan)
	for i, remove := range stale {
		if err := remove(); err != nil {
			return i, err
		}
	}
	return len(stale), err
}

// StaleTemp counts what CleanTemp(olderThan) would remove, removing nothing.
func (s *Engine) StaleTemp(olderThan time.Time) (int, error) {
	stale, err := s.staleTemp(olderThan)
	return len(stale), err
}

func (s *Engine) staleTemp(olderThan time.Time) ([]func() error, error) {
	live := map[string]bool{}
	err := s.list("tus/", func(o types.Object) error {
		key := aws.ToString(o.Key)
		if !strings.HasSuffix(key, "/upload") {
			return nil
		}
		rec, err := s.readRecordKey(key)
		if err == nil && rec != nil {
			live[rec.UploadID] = true
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	var stale []func() error
	pages := s3.NewListMultipartUploadsPaginator(s.client, &s3.ListMultipartUploadsInput{Bucket: &s.bucket})
	for pages.HasMorePages() {
		page, err := pages.NextPage(background())
		if err != nil {
			return nil, s3Err("ListMultipartUploads", "", err)
		}
		for _, u := range page.Uploads {
			if live[aws.ToString(u.UploadId)] || !aws.ToTime(u.Initiated).Before(olderThan) {
				continue
			}
			key, id := aws.ToString(u.Key), aws.ToString(u.UploadId)
			stale = append(stale, func() error { return s.abortUpload(key, id) })
		}
	}
	for _, prefix := range []string{"claim/", "aside/", "probe/"} {
		err := s.list(prefix, func(o types.Object) error {
			if aws.ToTime(o.LastModified).Before(olderThan) {
				key := aws.ToString(o.Key)
				stale = append(stale, func() error { return s.deleteObject(key) })
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return stale, nil
}

// CheckWritable puts and deletes a small probe object, within ten seconds,
// for a readiness probe.
func (s *Engine) CheckWritable() error {
	var rnd [8]byte
	rand.Read(rnd[:])
	key := "probe/" + hex.EncodeToString(rnd[:])
	c, cancel := context.WithTimeout(background(), 10*time.Second)
	defer cancel()
	_, err := s.client.PutObject(c, &s3.PutObjectInput{Bucket: &s.bucket, Key: &key, Body: bytes.NewReader([]byte{0}), ContentLength: aws.Int64(1)})
	if err != nil {
		return s3Err("PutObject", key, err)
	}
	_, err = s.client.DeleteObject(c, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &key})
	return s3Err("DeleteObject", key, err)
}
