package s3

import (
	"bytes"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Hooks into the S3 engine for its tests in package blobs_test (which can
// import blobs/s3test; this package cannot).

var ParseURL = func(raw string) (bucket, endpoint, region string, err error) {
	loc, err := parseURL(raw)
	return loc.bucket, loc.endpoint, loc.region, err
}

// SetPause sets the hook called at the named steps of claim ("claim",
// before the claim is written) and Collect ("aside", after the copy aside;
// "deleted", after the delete, before the claim is read).
func (s *Engine) SetPause(f func(step string)) { s.pause = f }

// SetCopySize makes Collect copy blobs larger than n in parts.
func (s *Engine) SetCopySize(n int64) { s.copySize = n }

// CopyBlob copies blob src to blob dst as Collect does.
func (s *Engine) CopyBlob(src, dst string, size int64, ifAbsent bool) error {
	return s.copyObject(blobKey(src), blobKey(dst), size, ifAbsent)
}

// PutRaw puts b at blob/hash with the checksum sum, wrong or right.
func (s *Engine) PutRaw(hash string, b []byte, sum string) error {
	key := blobKey(hash)
	_, err := s.client.PutObject(background(), &s3.PutObjectInput{
		Bucket: &s.bucket, Key: &key, Body: bytes.NewReader(b),
		ContentLength: aws.Int64(int64(len(b))), ChecksumSHA256: &sum,
	})
	return s3Err("PutObject", key, err)
}

// UploadPartRaw starts a multipart upload to blob/hash and uploads b as its
// first part with the checksum sum; the upload is left open.
func (s *Engine) UploadPartRaw(hash string, b []byte, sum string) error {
	key := blobKey(hash)
	up, err := s.client.CreateMultipartUpload(background(), &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		return err
	}
	one := int32(1)
	_, err = s.client.UploadPart(background(), &s3.UploadPartInput{
		Bucket: &s.bucket, Key: &key, UploadId: up.UploadId, PartNumber: &one,
		Body: bytes.NewReader(b), ContentLength: aws.Int64(int64(len(b))), ChecksumSHA256: &sum,
	})
	return s3Err("UploadPart", key, err)
}

// Checksum is the x-amz-checksum-sha256 of b.
var Checksum = checksum

// PartialBuffer is the buffer an open partial of this engine holds now.
func PartialBuffer(p any) int64 { return int64(len(p.(*s3Partial).buf)) }
