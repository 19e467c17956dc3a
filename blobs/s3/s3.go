// Package s3 is the S3 engine of package blobs: blobs in a bucket of any
// S3-compatible object store. It is the only package that imports the S3
// client.
//
// The client is aws-sdk-go-v2: it exposes every header the engine relies on
// as a typed field (ChecksumSHA256, IfNoneMatch on PutObject, CopyObject and
// CompleteMultipartUpload, per-part checksums), and versitygw, the S3 server
// the tests run, is itself tested against it. Its default CRC checksums
// "when supported" are turned off so that the only checksum sent is the
// SHA-256 that names a blob.
//
// Layout of the bucket:
//
//	blob/<hash>                  a blob, written once, never rewritten
//	claim/<hash>                 when a Put last found blob <hash> already stored
//	aside/<hash>                 a blob Collect is removing, until it decides
//	tus/<id>/upload              a partial's record: its multipart upload id,
//	                             declared hash and part size (JSON)
//	tus/<id>/staging/<start>     a partial's bytes from offset <start> (a part
//	                             boundary) that do not yet fill a part
//	probe/<random>               CheckWritable's object, deleted at once
//	sealbox-instance             the instance's id (blobs.InstanceMarker), written once
//
// Guarantees, the same as the local store's:
//   - A put sends x-amz-checksum-sha256 (the declared hash) and If-None-Match:
//     *, so the store itself refuses bytes that do not hash to the name and
//     never replaces a stored blob; 412 means the blob exists (created=false).
//     A blob larger than one part is a multipart upload straight to its
//     final key with a SHA-256 checksum on every part, hashed as it streams,
//     completed (If-None-Match: *) only when the whole hash matches and
//     aborted otherwise. Memory is one pooled part buffer per Put.
//   - A Put that finds the blob stored writes claim/<hash> and then looks for
//     the blob; if it is gone (a concurrent Collect) it places its bytes
//     again (a multipart Put keeps its upload open until then). Collect
//     copies the blob aside, deletes it and then reads the claim: one newer
//     than its cutoff puts the blob back. Whichever order the requests land
//     in, a Put that reports success leaves the blob in place.
//   - Reads never ask for a size the caller knows (OpenSized) and send one
//     GET per range read, with explicit bounds.
//   - A partial (a tus transfer) is a multipart upload to blob/<hash> with
//     fixed-size parts, so part n always holds the bytes from (n-1)*size:
//     nothing about it lives only in one process after Sync returns, and
//     OpenPartial rebuilds it from the bucket alone, on any node.
package s3

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"sealbox/blobs"
)

const (
	// DefaultPartSize is the part size of multipart uploads unless
	// Options says otherwise: at S3's limit of 10,000 parts it allows
	// blobs of 78 GiB, well past the default maximum blob (16 GiB).
	DefaultPartSize = 8 << 20
	// minPartSize is S3's smallest part but the last.
	minPartSize = 5 << 20
	// maxCopySize is the largest object S3 copies in one CopyObject; Collect
	// copies a larger blob in parts of this size.
	maxCopySize = 5 << 30
)

// Options configures Open. The zero value is the production setting.
type Options struct {
	// AccessKeyID and SecretAccessKey are the credentials; when both are
	// empty they are read from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
	// Nothing else is consulted (no shared config file, no instance
	// metadata service that could stall a start).
	AccessKeyID, SecretAccessKey string
	// Observe, when set, is called once per S3 request (each retry is a
	// request) with the operation's name (PutObject, GetObject, ...), its
	// latency up to the response headers and its error.
	Observe func(op string, d time.Duration, err error)
	// Metrics, when set, is where Open registers the engine's series:
	// sealbox_s3_request_duration_seconds, the latency of each request (each
	// retry is one) by operation and outcome (ok or error), never labelled
	// with a key or a bucket. Engines opened on one registerer share it.
	Metrics prometheus.Registerer
	// PartSize is the size of multipart upload parts: DefaultPartSize when
	// 0, else 5 MiB to 5 GiB (S3's limits). A partial keeps the part size it was
	// created with, so nodes configured differently still resume each
	// other's transfers.
	PartSize int64
	// Now is the clock of claims (see Collect); time.Now when nil.
	Now func() time.Time
	// CreateBucket makes Open create the bucket when it is missing
	// (CreatedBucket then says so) instead of refusing it.
	CreateBucket bool
}

// Engine is a blob store in a bucket of an S3-compatible object store. It is
// safe for concurrent use, by goroutines and by any number of processes on
// the same bucket.
type Engine struct {
	client   *s3.Client
	bucket   string
	endpoint string // "" for AWS's own
	region   string
	created  bool // Open created the bucket
	partSize int64
	now      func() time.Time
	parts    sync.Pool // *[]byte of partSize, Put's and partials' buffers
	copySize int64     // maxCopySize; smaller in tests
	// pause, set only by tests, is called at the named steps of claim and
	// Collect, so a test can run one inside the other's window.
	pause func(step string)
}

// step calls the test hook, if any.
func (s *Engine) step(name string) {
	if s.pause != nil {
		s.pause(name)
	}
}

var (
	_ blobs.Engine      = (*Engine)(nil)
	_ blobs.TempCleaner = (*Engine)(nil)
)

// Open opens the bucket named by rawURL, s3://BUCKET?endpoint=URL&region=R
// (endpoint: the store's http or https base URL, AWS's own when absent;
// region: us-east-1 when absent), and checks that it exists and the
// credentials reach it (one HEAD, bounded by ctx), creating it when it is
// missing and opts.CreateBucket is set. Requests use path-style addressing.
func Open(ctx context.Context, rawURL string, opts Options) (*Engine, error) {
	client, loc, opts, err := newClient(rawURL, opts)
	if err != nil {
		return nil, err
	}
	s := &Engine{client: client, bucket: loc.bucket, endpoint: loc.endpoint, region: loc.region, partSize: opts.PartSize, now: opts.Now, copySize: maxCopySize}
	s.parts.New = func() any {
		b := make([]byte, s.partSize)
		return &b
	}
	if err := s.openBucket(ctx, opts.CreateBucket); err != nil {
		return nil, err
	}
	return s, nil
}

// CreateBucket creates the bucket rawURL names (see Open), for setups
// and tests that start from an empty store.
func CreateBucket(ctx context.Context, rawURL string, opts Options) error {
	client, loc, _, err := newClient(rawURL, opts)
	if err != nil {
		return err
	}
	_, err = client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &loc.bucket})
	if err != nil {
		return fmt.Errorf("blobs: create s3 bucket %q: %w", loc.bucket, err)
	}
	return nil
}

// newClient builds the client of the bucket rawURL names, and returns
// opts with its defaults filled in.
func newClient(rawURL string, opts Options) (*s3.Client, s3Location, Options, error) {
	loc, err := parseURL(rawURL)
	if err != nil {
		return nil, loc, opts, err
	}
	if opts.AccessKeyID == "" && opts.SecretAccessKey == "" {
		opts.AccessKeyID, opts.SecretAccessKey = os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	}
	if opts.AccessKeyID == "" || opts.SecretAccessKey == "" {
		return nil, loc, opts, errors.New("blobs: s3 needs credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	}
	if opts.PartSize == 0 {
		opts.PartSize = DefaultPartSize
	}
	if opts.PartSize < minPartSize || opts.PartSize > maxCopySize {
		return nil, loc, opts, fmt.Errorf("blobs: s3 part size %d is outside S3's 5 MiB to 5 GiB", opts.PartSize)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	observe := opts.Observe
	if opts.Metrics != nil {
		record, err := requestMetrics(opts.Metrics)
		if err != nil {
			return nil, loc, opts, fmt.Errorf("blobs: register the s3 metrics: %w", err)
		}
		observe = observeBoth(opts.Observe, record)
	}
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		// A store that accepts a connection and never answers must not
		// hang a request forever; bodies stream without a deadline.
		tr.ResponseHeaderTimeout = 2 * time.Minute
		tr.MaxIdleConnsPerHost = 64
	})
	cfg := aws.Config{
		Region:                     loc.region,
		Credentials:                aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(opts.AccessKeyID, opts.SecretAccessKey, "")),
		HTTPClient:                 httpClient,
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
		// The standard retryer, without its client-side retry quota: that
		// quota, spent by one burst of failed attempts (a flood of puts of
		// blobs already stored, which some servers refuse by resetting the
		// connection), would stop every request of the node from retrying
		// a passing fault, readiness probes included.
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) { o.RateLimiter = ratelimit.None })
		},
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = true
		if loc.endpoint != "" {
			o.BaseEndpoint = aws.String(loc.endpoint)
		}
		if observe != nil {
			o.APIOptions = append(o.APIOptions, observeRequests(observe))
		}
	})
	return client, loc, opts, nil
}

// observeRequests calls observe after each attempt of each request: the
// deserialize step runs once per attempt, inside the retry loop.
func observeRequests(observe func(string, time.Duration, error)) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Deserialize.Add(middleware.DeserializeMiddlewareFunc("sealboxObserve",
			func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
				start := time.Now()
				out, md, err := next.HandleDeserialize(ctx, in)
				observe(awsmiddleware.GetOperationName(ctx), time.Since(start), err)
				return out, md, err
			}), middleware.Before)
	}
}

// s3Location is what an s3:// URL names.
type s3Location struct {
	bucket, endpoint, region string
}

// parseURL parses s3://BUCKET?endpoint=URL&region=R. It refuses anything
// else (a path, credentials, an unknown or repeated parameter), and its
// errors never repeat the URL, which could hold a secret by mistake.
func parseURL(raw string) (s3Location, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return s3Location{}, errors.New("blobs: the s3 URL does not parse; want s3://BUCKET?endpoint=URL&region=R")
	}
	switch {
	case u.Scheme != "s3":
		return s3Location{}, errors.New("blobs: the blob store URL must start with s3://")
	case u.User != nil:
		return s3Location{}, errors.New("blobs: the s3 URL must not hold credentials; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	case u.Opaque != "" || (u.Path != "" && u.Path != "/") || u.Fragment != "" || u.Port() != "":
		return s3Location{}, errors.New("blobs: the s3 URL names a bucket only: s3://BUCKET?endpoint=URL&region=R")
	case !validBucket(u.Host):
		return s3Location{}, fmt.Errorf("blobs: %q is not an S3 bucket name (3 to 63 of a-z, 0-9, '.', '-')", u.Host)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return s3Location{}, errors.New("blobs: the s3 URL's parameters do not parse")
	}
	loc := s3Location{bucket: u.Host, region: "us-east-1"}
	for k, v := range q {
		if len(v) != 1 {
			return s3Location{}, fmt.Errorf("blobs: the s3 URL gives %q more than once", k)
		}
		switch k {
		case "endpoint":
			e, err := url.Parse(v[0])
			if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" || e.User != nil ||
				e.RawQuery != "" || e.Fragment != "" || (e.Path != "" && e.Path != "/") {
				return s3Location{}, errors.New("blobs: the s3 URL's endpoint must be http(s)://HOST[:PORT]")
			}
			loc.endpoint = e.Scheme + "://" + e.Host
		case "region":
			if v[0] == "" || strings.ContainsFunc(v[0], func(r rune) bool {
				return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-')
			}) {
				return s3Location{}, errors.New("blobs: the s3 URL's region must be a region name such as us-east-1")
			}
			loc.region = v[0]
		default:
			return s3Location{}, fmt.Errorf("blobs: the s3 URL has an unknown parameter %q (known: endpoint, region)", k)
		}
	}
	return loc, nil
}

func validBucket(b string) bool {
	if len(b) < 3 || len(b) > 63 {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && ((c != '.' && c != '-') || i == 0 || i == len(b)-1) {
			return false
		}
	}
	return true
}
