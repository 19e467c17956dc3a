package s3

import (
	"bytes"
	"errors"
	"io"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"sealbox/blobs"
)

// Put streams r into the bucket as blobs.Engine.Put says, with the same results
// and errors. A body larger than one part needs want (its key is chosen
// before its last byte is read); sealbox's callers without a hash put
// small blobs (manifests, metadata). Parts are Options.PartSize bytes, so
// a blob may be up to 10,000 parts long (78 GiB at the default).
func (s *Engine) Put(r io.Reader, want string, maxSize int64) (blobs.Info, bool, error) {
	if want != "" && !blobs.ValidHash(want) {
		return blobs.Info{}, false, blobs.ErrInvalidHash
	}
	limit := int64(math.MaxInt64)
	if maxSize > 0 && maxSize < math.MaxInt64 {
		limit = maxSize + 1 // one byte more tells "too large" from "exactly maxSize"
	}
	lr := &io.LimitedReader{R: r, N: limit}
	// A blob bounded below a part is read into a buffer of its bound, not a
	// pooled part (PutBuffer): a small PUT holds what it may fill.
	buf := &[]byte{}
	if size := s.PutBuffer(maxSize); size < s.partSize {
		*buf = make([]byte, size)
	} else {
		buf = s.parts.Get().(*[]byte)
		defer s.parts.Put(buf)
	}
	n, err := io.ReadFull(lr, *buf)
	if maxSize > 0 && int64(n) > maxSize {
		return blobs.Info{}, false, blobs.ErrTooLarge
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		b := (*buf)[:n]
		hash := blobs.AddressOf(b)
		if want != "" && hash != want {
			return blobs.Info{}, false, blobs.ErrHashMismatch
		}
		return s.putOnce(hash, b)
	}
	if err != nil {
		return blobs.Info{}, false, err
	}
	if want == "" {
		// Exactly one part fits one request; anything more needs the key
		// before its last byte is read.
		var one [1]byte
		if k, err := io.ReadFull(lr, one[:]); k == 0 && err == io.EOF {
			return s.putOnce(blobs.AddressOf(*buf), *buf)
		}
		return blobs.Info{}, false, errors.New("blobs: an s3 Put larger than one part needs the blob's hash")
	}
	return s.putMultipart(want, *buf, lr, maxSize)
}

// putOnce places b, which hashes to hash, in one request.
func (s *Engine) putOnce(hash string, b []byte) (blobs.Info, bool, error) {
	place := func() (bool, error) {
		err := s.putChecked(blobKey(hash), b, hashChecksum(hash), true)
		switch {
		case err == nil:
			return true, nil
		case isPreconditionFailed(err):
			return false, nil
		case httpStatus(err) == 0:
			// No answer arrived. A server may refuse a conditional put
			// (412) before it reads the body and close the connection
			// while the body is still being sent (versitygw does), which
			// the client sees only as a broken send: a blob in place is
			// that refusal. Every put is checked against its name, so its
			// bytes are these.
			if _, serr := s.Stat(hash); serr == nil {
				return false, nil
			}
		}
		return false, s3Err("PutObject", blobKey(hash), err)
	}
	created, err := place()
	if err != nil {
		return blobs.Info{}, false, err
	}
	if created {
		return blobs.Info{Hash: hash, Size: int64(len(b)), ModTime: s.now()}, true, nil
	}
	return s.claim(hash, int64(len(b)), place, func() error {
		return s3Err("PutObject", blobKey(hash), s.putChecked(blobKey(hash), b, hashChecksum(hash), false))
	})
}

// putMultipart streams first and then the rest of r to blob/hash as a
// multipart upload, completed only if the bytes hash to hash.
func (s *Engine) putMultipart(hash string, first []byte, r io.Reader, maxSize int64) (blobs.Info, bool, error) {
	key := blobKey(hash)
	up, err := s.client.CreateMultipartUpload(background(), &s3.CreateMultipartUploadInput{
		Bucket: &s.bucket, Key: &key, ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
	})
	if err != nil {
		return blobs.Info{}, false, s3Err("CreateMultipartUpload", key, err)
	}
	uploadID := *up.UploadId
	// The upload stays open until Put returns, so that a claim that finds
	// the blob gone can complete it again; then it is aborted (a no-op when
	// it completed).
	defer s.abortUpload(key, uploadID)

	h := blobs.NewHash()
	var parts []types.CompletedPart
	var size int64
	chunk := first
	for len(chunk) > 0 {
		h.Write(chunk)
		size += int64(len(chunk))
		if maxSize > 0 && size > maxSize {
			return blobs.Info{}, false, blobs.ErrTooLarge
		}
		part, err := s.uploadPart(key, uploadID, int32(len(parts)+1), chunk)
		if err != nil {
			return blobs.Info{}, false, err
		}
		parts = append(parts, part)
		if len(chunk) < len(first) {
			break // a short read ended the body
		}
		n, err := io.ReadFull(r, first)
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return blobs.Info{}, false, err
		}
		chunk = first[:n]
	}
	if blobs.Address(h) != hash {
		return blobs.Info{}, false, blobs.ErrHashMismatch
	}
	complete := func() (bool, error) { return s.completeUpload(key, uploadID, parts, true) }
	created, err := complete()
	if err != nil {
		return blobs.Info{}, false, err
	}
	if created {
		return blobs.Info{Hash: hash, Size: size, ModTime: s.now()}, true, nil
	}
	return s.claim(hash, size, complete, func() error {
		_, err := s.completeUpload(key, uploadID, parts, false)
		return err
	})
}

// uploadPart uploads b as part number n with its SHA-256 checksum.
func (s *Engine) uploadPart(key, uploadID string, n int32, b []byte) (types.CompletedPart, error) {
	sum := checksum(b)
	out, err := s.client.UploadPart(background(), &s3.UploadPartInput{
		Bucket: &s.bucket, Key: &key, UploadId: &uploadID, PartNumber: &n,
		Body: bytes.NewReader(b), ContentLength: aws.Int64(int64(len(b))), ChecksumSHA256: &sum,
	})
	if err != nil {
		return types.CompletedPart{}, s3Err("UploadPart", key, err)
	}
	return types.CompletedPart{PartNumber: &n, ETag: out.ETag, ChecksumSHA256: &sum}, nil
}

// completeUpload completes a multipart upload, when ifAbsent only if its
// key does not exist, and reports whether it did.
func (s *Engine) completeUpload(key, uploadID string, parts []types.CompletedPart, ifAbsent bool) (bool, error) {
	in := &s3.CompleteMultipartUploadInput{
		Bucket: &s.bucket, Key: &key, UploadId: &uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	}
	if ifAbsent {
		in.IfNoneMatch = aws.String("*")
	}
	_, err := s.client.CompleteMultipartUpload(background(), in)
	if isPreconditionFailed(err) {
		return false, nil
	}
	return err == nil, s3Err("CompleteMultipartUpload", key, err)
}

func (s *Engine) abortUpload(key, uploadID string) error {
	_, err := s.client.AbortMultipartUpload(background(), &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: &key, UploadId: &uploadID})
	if err != nil && !isNotFound(err) && !isNoSuchUpload(err) {
		return s3Err("AbortMultipartUpload", key, err)
	}
	return nil
}

// claim keeps blob hash, which a Put found already stored, from a
// concurrent Collect: it records the claim, then looks for the blob, and
// if the blob is gone places the Put's bytes again with place (which
// reports whether it stored them). See Collect for the other half.
//
// A stored blob whose size is not size, that of the bytes the Put holds
// and verified against the name, is damaged (this engine never writes one:
// the store checks every put against its hash); replace, unless nil,
// overwrites it with the Put's bytes, so a damaged object is never
// reported, nor its size recorded, as the blob.
func (s *Engine) claim(hash string, size int64, place func() (bool, error), replace func() error) (blobs.Info, bool, error) {
	for {
		s.step("claim")
		stamp := []byte(strconv.FormatInt(s.now().UnixNano(), 10))
		if err := s.putObject(claimKey(hash), stamp, false); err != nil {
			return blobs.Info{}, false, s3Err("PutObject", claimKey(hash), err)
		}
		info, err := s.Stat(hash)
		if err == nil && replace != nil && info.Size != size {
			if err := replace(); err != nil {
				return blobs.Info{}, false, err
			}
			return blobs.Info{Hash: hash, Size: size, ModTime: s.now()}, true, nil
		}
		if !errors.Is(err, blobs.ErrNotFound) {
			return info, false, err
		}
		created, err := place()
		if err != nil || created {
			return blobs.Info{Hash: hash, Size: size, ModTime: s.now()}, created, err
		}
		// Placed again by another Put since the look: claim that one.
	}
}

// claimedSince reports whether a Put claimed blob hash at or after cutoff.
func (s *Engine) claimedSince(hash string, cutoff time.Time) (bool, error) {
	b, err := s.readSmall(claimKey(hash))
	if errors.Is(err, blobs.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	ns, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		// Not a claim this engine wrote: count it as fresh, keeping the blob.
		return true, nil
	}
	return !time.Unix(0, ns).Before(cutoff), nil
}

// PutSmall stores each of bs under its SHA-256, as PutBytes does, all at
// once (one request each, concurrently: an op's manifest and metadata cost
// one round trip, not two); on an error some may be stored and others not.
func (s *Engine) PutSmall(bs ...[]byte) error {
	errs := make([]error, len(bs))
	var wg sync.WaitGroup
	for i, b := range bs {
		wg.Go(func() {
			if int64(len(b)) > s.partSize {
				// Put streams what passes one part as a multipart upload,
				// which needs the hash before the last byte: it is known.
				_, _, errs[i] = s.Put(bytes.NewReader(b), blobs.AddressOf(b), 0)
				return
			}
			// The bytes are in hand: no part buffer to fill.
			_, _, errs[i] = s.putOnce(blobs.AddressOf(b), b)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
