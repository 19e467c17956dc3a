package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"sealbox/blobs"
)

func blobKey(hash string) string  { return "blob/" + hash }
func claimKey(hash string) string { return "claim/" + hash }
func asideKey(hash string) string { return "aside/" + hash }
func partialPrefix(id string) string {
	return "tus/" + id + "/"
}
func recordKey(id string) string { return partialPrefix(id) + "upload" }
func stagingKey(id string, start int64) string {
	return partialPrefix(id) + "staging/" + strconv.FormatInt(start, 10)
}

// httpStatus is the status of a failed request, 0 when it got no answer.
func httpStatus(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func isPreconditionFailed(err error) bool { return httpStatus(err) == http.StatusPreconditionFailed }
func isNotFound(err error) bool           { return httpStatus(err) == http.StatusNotFound }
func isNoSuchUpload(err error) bool       { return errorCode(err) == "NoSuchUpload" }

// isBadDigest reports the store refusing bytes that do not match their
// checksum.
func isBadDigest(err error) bool {
	switch errorCode(err) {
	case "BadDigest", "XAmzContentChecksumMismatch", "InvalidDigest":
		return true
	}
	return false
}

// s3Err turns a failed request into a blobs error: blobs.ErrNotFound for a 404,
// blobs.ErrHashMismatch when the store refused a checksum, else the request's
// error with the operation and key, said as a sentence (describeS3).
func s3Err(op, key string, err error) error {
	switch {
	case err == nil:
		return nil
	case isNotFound(err) && !isNoSuchUpload(err):
		return blobs.ErrNotFound
	case isBadDigest(err):
		return fmt.Errorf("%w: s3 refused %s: %v", blobs.ErrHashMismatch, key, err)
	}
	return &sentenceError{msg: fmt.Sprintf("blobs: s3 %s %s: %s", op, key, describeS3(err)), err: err}
}

func checksum(b []byte) string {
	sum := sha256.Sum256(b)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// hashChecksum is the x-amz-checksum-sha256 of the bytes named hash.
func hashChecksum(hash string) string {
	raw, _ := hex.DecodeString(hash)
	return base64.StdEncoding.EncodeToString(raw)
}

// background is the context of the engine's requests: Engine's methods
// take none (the local store's need none), so a request is bounded by the
// HTTP client's timeouts, not by its caller.
func background() context.Context { return context.Background() }

// putObject writes b at key with its SHA-256 checksum, and with
// If-None-Match: * when ifAbsent.
func (s *Engine) putObject(key string, b []byte, ifAbsent bool) error {
	return s.putChecked(key, b, checksum(b), ifAbsent)
}

// putChecked is putObject with the checksum given: a blob's is its name,
// so the store verifies the bytes against the declared hash itself.
func (s *Engine) putChecked(key string, b []byte, sum string, ifAbsent bool) error {
	in := &s3.PutObjectInput{
		Bucket: &s.bucket, Key: &key, Body: bytes.NewReader(b),
		ContentLength: aws.Int64(int64(len(b))), ChecksumSHA256: &sum,
	}
	if ifAbsent {
		in.IfNoneMatch = aws.String("*")
	}
	_, err := s.client.PutObject(background(), in)
	return err
}

func (s *Engine) deleteObject(key string) error {
	_, err := s.client.DeleteObject(background(), &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil && !isNotFound(err) {
		return s3Err("DeleteObject", key, err)
	}
	return nil
}

func (s *Engine) getObject(key string, rng string) (io.ReadCloser, error) {
	in := &s3.GetObjectInput{Bucket: &s.bucket, Key: &key}
	if rng != "" {
		in.Range = &rng
	}
	out, err := s.client.GetObject(background(), in)
	if err != nil {
		return nil, s3Err("GetObject", key, err)
	}
	return out.Body, nil
}

// getRange GETs the bytes [start, end) of key, and refuses an answer of
// any other length: a server that ignored the Range header would
// otherwise hand a reader the blob's first bytes as if they were these.
func (s *Engine) getRange(key string, start, end int64) (io.ReadCloser, error) {
	rng := fmt.Sprintf("bytes=%d-%d", start, end-1)
	out, err := s.client.GetObject(background(), &s3.GetObjectInput{Bucket: &s.bucket, Key: &key, Range: &rng})
	if err != nil {
		return nil, s3Err("GetObject", key, err)
	}
	if n := aws.ToInt64(out.ContentLength); n != end-start {
		out.Body.Close()
		return nil, fmt.Errorf("blobs: s3 GetObject %s %s answered %d bytes", key, rng, n)
	}
	return out.Body, nil
}

// readSmall reads a small object whole (a claim, a record).
func (s *Engine) readSmall(key string) ([]byte, error) {
	body, err := s.getObject(key, "")
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return io.ReadAll(io.LimitReader(body, 1<<16))
}
