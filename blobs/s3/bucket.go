package s3

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// openBucket checks that the bucket exists and the credentials reach it
// (one HEAD); a missing bucket is created when create is set. Its errors
// are sentences naming the bucket and the endpoint, never the client's
// dump of the request.
func (s *Engine) openBucket(ctx context.Context, create bool) error {
	_, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &s.bucket})
	if err == nil {
		return nil
	}
	if isNotFound(err) {
		// An answer to HEAD has no body, so a 404 does not say whether the
		// bucket or the access key is unknown (some servers answer 404 for
		// either): a listing's answer does.
		_, err = s.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &s.bucket, MaxKeys: aws.Int32(1)})
		if err == nil {
			return nil
		}
	}
	if errorCode(err) != "NoSuchBucket" {
		return bucketErr(fmt.Sprintf("blobs: the bucket %q at %s cannot be used: %s", s.bucket, s.Endpoint(), describeS3(err)), err)
	}
	if !create {
		return bucketErr(fmt.Sprintf("blobs: the bucket %q does not exist at %s", s.bucket, s.Endpoint()), errors.Join(ErrNoBucket, err))
	}
	if _, err := s.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &s.bucket}); err != nil {
		return bucketErr(fmt.Sprintf("blobs: the bucket %q does not exist at %s, and creating it failed: %s (create it, or give the name of one that exists)",
			s.bucket, s.Endpoint(), describeS3(err)), err)
	}
	s.created = true
	return nil
}

// CreatedBucket reports whether Open created the bucket, which was
// missing.
func (s *Engine) CreatedBucket() bool { return s.created }

// Bucket is the bucket's name.
func (s *Engine) Bucket() string { return s.bucket }

// Endpoint names where the bucket is: the URL's endpoint, or AWS S3 in its
// region when the URL gives none.
func (s *Engine) Endpoint() string {
	if s.endpoint == "" {
		return "AWS S3 (region " + s.region + ", no endpoint= in the URL)"
	}
	return s.endpoint
}

// ErrNoBucket is wrapped by Open's error when the bucket does not exist
// and Options.CreateBucket is not set: the credentials reached the endpoint,
// and a caller may create the bucket later, once nothing else can fail.
var ErrNoBucket = errors.New("blobs: no such bucket")

// sentenceError is an error whose message is a sentence for the operator,
// wrapping the client's error for errors.Is and errors.As.
type sentenceError struct {
	msg string
	err error
}

func (e *sentenceError) Error() string { return e.msg }
func (e *sentenceError) Unwrap() error { return e.err }

func bucketErr(msg string, err error) error { return &sentenceError{msg: msg, err: err} }

// describeS3 says in a few words why a request failed: the endpoint's
// answer (status, code and message), or why there was none.
func describeS3(err error) string {
	var opErr *net.OpError
	var dnsErr *net.DNSError
	switch status := httpStatus(err); {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return "no answer in time"
	case errors.As(err, &dnsErr):
		return "its host name does not resolve (" + dnsErr.Error() + ")"
	case errors.As(err, &opErr):
		return "it does not answer (" + opErr.Error() + ")"
	case status == http.StatusForbidden || status == http.StatusUnauthorized || credentialCodes[errorCode(err)]:
		return fmt.Sprintf("it refuses the credentials in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (%d %s)", status, apiDetail(err))
	case status != 0:
		return fmt.Sprintf("it answered %d %s", status, apiDetail(err))
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return apiDetail(err)
	}
	return "the request failed without an answer"
}

// credentialCodes are the error codes of an answer refusing the access key
// or its signature, whatever the status (some servers answer 404).
var credentialCodes = map[string]bool{
	"InvalidAccessKeyId": true, "SignatureDoesNotMatch": true, "AccessDenied": true, "XAdminUserNotFound": true,
}

// apiDetail is the code and message of an S3 error answer.
func apiDetail(err error) string {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return http.StatusText(httpStatus(err))
	}
	if msg := ae.ErrorMessage(); msg != "" && msg != ae.ErrorCode() {
		return ae.ErrorCode() + ": " + msg
	}
	return ae.ErrorCode()
}
