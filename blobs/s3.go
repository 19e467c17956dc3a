package blobs

// The S3 engine: blobs in a bucket of any S3-compatible object store. This
// is the only file that imports the S3 client.
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
//	sealbox-instance             the instance's id (InstanceMarker), written once
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
import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
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
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

const (
	// DefaultPartSize is the part size of multipart uploads unless
	// S3Options says otherwise: at S3's limit of 10,000 parts it allows
	// blobs of 78 GiB, well past the default maximum blob (16 GiB).
	DefaultPartSize = 8 << 20
	// minPartSize is S3's smallest part but the last.
	minPartSize = 5 << 20
	// maxCopySize is the largest object S3 copies in one CopyObject; Collect
	// copies a larger blob in parts of this size.
	maxCopySize = 5 << 30
)

// S3Options configures OpenS3. The zero value is the production setting.
type S3Options struct {
	// AccessKeyID and SecretAccessKey are the credentials; when both are
	// empty they are read from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
	// Nothing else is consulted (no shared config file, no instance
	// metadata service that could stall a start).
	AccessKeyID, SecretAccessKey string
	// Observe, when set, is called once per S3 request (each retry is a
	// request) with the operation's name (PutObject, GetObject, ...), its
	// latency up to the response headers and its error.
	Observe func(op string, d time.Duration, err error)
	// PartSize is the size of multipart upload parts: DefaultPartSize when
	// 0, else 5 MiB to 5 GiB (S3's limits). A partial keeps the part size it was
	// created with, so nodes configured differently still resume each
	// other's transfers.
	PartSize int64
	// Now is the clock of claims (see Collect); time.Now when nil.
	Now func() time.Time
	// CreateBucket makes OpenS3 create the bucket when it is missing
	// (CreatedBucket then says so) instead of refusing it.
	CreateBucket bool
}

// S3 is a blob store in a bucket of an S3-compatible object store. It is
// safe for concurrent use, by goroutines and by any number of processes on
// the same bucket.
type S3 struct {
	client   *s3.Client
	bucket   string
	endpoint string // "" for AWS's own
	region   string
	created  bool // OpenS3 created the bucket
	partSize int64
	now      func() time.Time
	parts    sync.Pool // *[]byte of partSize, Put's and partials' buffers
	copySize int64     // maxCopySize; smaller in tests
	// pause, set only by tests, is called at the named steps of claim and
	// Collect, so a test can run one inside the other's window.
	pause func(step string)
}

// step calls the test hook, if any.
func (s *S3) step(name string) {
	if s.pause != nil {
		s.pause(name)
	}
}

var (
	_ Engine      = (*S3)(nil)
	_ TempCleaner = (*S3)(nil)
)

// OpenS3 opens the bucket named by rawURL, s3://BUCKET?endpoint=URL&region=R
// (endpoint: the store's http or https base URL, AWS's own when absent;
// region: us-east-1 when absent), and checks that it exists and the
// credentials reach it (one HEAD, bounded by ctx), creating it when it is
// missing and opts.CreateBucket is set. Requests use path-style addressing.
func OpenS3(ctx context.Context, rawURL string, opts S3Options) (*S3, error) {
	client, loc, opts, err := newS3Client(rawURL, opts)
	if err != nil {
		return nil, err
	}
	s := &S3{client: client, bucket: loc.bucket, endpoint: loc.endpoint, region: loc.region, partSize: opts.PartSize, now: opts.Now, copySize: maxCopySize}
	s.parts.New = func() any {
		b := make([]byte, s.partSize)
		return &b
	}
	if err := s.openBucket(ctx, opts.CreateBucket); err != nil {
		return nil, err
	}
	return s, nil
}

// CreateS3Bucket creates the bucket rawURL names (see OpenS3), for setups
// and tests that start from an empty store.
func CreateS3Bucket(ctx context.Context, rawURL string, opts S3Options) error {
	client, loc, _, err := newS3Client(rawURL, opts)
	if err != nil {
		return err
	}
	_, err = client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &loc.bucket})
	if err != nil {
		return fmt.Errorf("blobs: create s3 bucket %q: %w", loc.bucket, err)
	}
	return nil
}

// newS3Client builds the client of the bucket rawURL names, and returns
// opts with its defaults filled in.
func newS3Client(rawURL string, opts S3Options) (*s3.Client, s3Location, S3Options, error) {
	loc, err := parseS3URL(rawURL)
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
		if opts.Observe != nil {
			o.APIOptions = append(o.APIOptions, observeRequests(opts.Observe))
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

// parseS3URL parses s3://BUCKET?endpoint=URL&region=R. It refuses anything
// else (a path, credentials, an unknown or repeated parameter), and its
// errors never repeat the URL, which could hold a secret by mistake.
func parseS3URL(raw string) (s3Location, error) {
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

// s3Err turns a failed request into a blobs error: ErrNotFound for a 404,
// ErrHashMismatch when the store refused a checksum, else the request's
// error with the operation and key, said as a sentence (describeS3).
func s3Err(op, key string, err error) error {
	switch {
	case err == nil:
		return nil
	case isNotFound(err) && !isNoSuchUpload(err):
		return ErrNotFound
	case isBadDigest(err):
		return fmt.Errorf("%w: s3 refused %s: %v", ErrHashMismatch, key, err)
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
func (s *S3) putObject(key string, b []byte, ifAbsent bool) error {
	return s.putChecked(key, b, checksum(b), ifAbsent)
}

// putChecked is putObject with the checksum given: a blob's is its name,
// so the store verifies the bytes against the declared hash itself.
func (s *S3) putChecked(key string, b []byte, sum string, ifAbsent bool) error {
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

func (s *S3) deleteObject(key string) error {
	_, err := s.client.DeleteObject(background(), &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil && !isNotFound(err) {
		return s3Err("DeleteObject", key, err)
	}
	return nil
}

func (s *S3) getObject(key string, rng string) (io.ReadCloser, error) {
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
func (s *S3) getRange(key string, start, end int64) (io.ReadCloser, error) {
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
func (s *S3) readSmall(key string) ([]byte, error) {
	body, err := s.getObject(key, "")
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return io.ReadAll(io.LimitReader(body, 1<<16))
}

// Put streams r into the bucket as *Dir.Put does, with the same results
// and errors. A body larger than one part needs want (its key is chosen
// before its last byte is read); sealbox's callers without a hash put
// small blobs (manifests, metadata). Parts are S3Options.PartSize bytes, so
// a blob may be up to 10,000 parts long (78 GiB at the default).
func (s *S3) Put(r io.Reader, want string, maxSize int64) (Info, bool, error) {
	if want != "" && !ValidHash(want) {
		return Info{}, false, ErrInvalidHash
	}
	limit := int64(math.MaxInt64)
	if maxSize > 0 && maxSize < math.MaxInt64 {
		limit = maxSize + 1 // one byte more tells "too large" from "exactly maxSize"
	}
	lr := &io.LimitedReader{R: r, N: limit}
	buf := s.parts.Get().(*[]byte)
	defer s.parts.Put(buf)
	n, err := io.ReadFull(lr, *buf)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		b := (*buf)[:n]
		if maxSize > 0 && int64(n) > maxSize {
			return Info{}, false, ErrTooLarge
		}
		hash := AddressOf(b)
		if want != "" && hash != want {
			return Info{}, false, ErrHashMismatch
		}
		return s.putOnce(hash, b)
	}
	if err != nil {
		return Info{}, false, err
	}
	if want == "" {
		// Exactly one part fits one request; anything more needs the key
		// before its last byte is read.
		var one [1]byte
		if k, err := io.ReadFull(lr, one[:]); k == 0 && err == io.EOF {
			return s.putOnce(AddressOf(*buf), *buf)
		}
		return Info{}, false, errors.New("blobs: an s3 Put larger than one part needs the blob's hash")
	}
	return s.putMultipart(want, *buf, lr, maxSize)
}

// putOnce places b, which hashes to hash, in one request.
func (s *S3) putOnce(hash string, b []byte) (Info, bool, error) {
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
		return Info{}, false, err
	}
	if created {
		return Info{Hash: hash, Size: int64(len(b)), ModTime: s.now()}, true, nil
	}
	return s.claim(hash, int64(len(b)), place, func() error {
		return s3Err("PutObject", blobKey(hash), s.putChecked(blobKey(hash), b, hashChecksum(hash), false))
	})
}

// putMultipart streams first and then the rest of r to blob/hash as a
// multipart upload, completed only if the bytes hash to hash.
func (s *S3) putMultipart(hash string, first []byte, r io.Reader, maxSize int64) (Info, bool, error) {
	key := blobKey(hash)
	up, err := s.client.CreateMultipartUpload(background(), &s3.CreateMultipartUploadInput{
		Bucket: &s.bucket, Key: &key, ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
	})
	if err != nil {
		return Info{}, false, s3Err("CreateMultipartUpload", key, err)
	}
	uploadID := *up.UploadId
	// The upload stays open until Put returns, so that a claim that finds
	// the blob gone can complete it again; then it is aborted (a no-op when
	// it completed).
	defer s.abortUpload(key, uploadID)

	h := NewHash()
	var parts []types.CompletedPart
	var size int64
	chunk := first
	for len(chunk) > 0 {
		h.Write(chunk)
		size += int64(len(chunk))
		if maxSize > 0 && size > maxSize {
			return Info{}, false, ErrTooLarge
		}
		part, err := s.uploadPart(key, uploadID, int32(len(parts)+1), chunk)
		if err != nil {
			return Info{}, false, err
		}
		parts = append(parts, part)
		if len(chunk) < len(first) {
			break // a short read ended the body
		}
		n, err := io.ReadFull(r, first)
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return Info{}, false, err
		}
		chunk = first[:n]
	}
	if Address(h) != hash {
		return Info{}, false, ErrHashMismatch
	}
	complete := func() (bool, error) { return s.completeUpload(key, uploadID, parts, true) }
	created, err := complete()
	if err != nil {
		return Info{}, false, err
	}
	if created {
		return Info{Hash: hash, Size: size, ModTime: s.now()}, true, nil
	}
	return s.claim(hash, size, complete, func() error {
		_, err := s.completeUpload(key, uploadID, parts, false)
		return err
	})
}

// uploadPart uploads b as part number n with its SHA-256 checksum.
func (s *S3) uploadPart(key, uploadID string, n int32, b []byte) (types.CompletedPart, error) {
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
func (s *S3) completeUpload(key, uploadID string, parts []types.CompletedPart, ifAbsent bool) (bool, error) {
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

func (s *S3) abortUpload(key, uploadID string) error {
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
func (s *S3) claim(hash string, size int64, place func() (bool, error), replace func() error) (Info, bool, error) {
	for {
		s.step("claim")
		stamp := []byte(strconv.FormatInt(s.now().UnixNano(), 10))
		if err := s.putObject(claimKey(hash), stamp, false); err != nil {
			return Info{}, false, s3Err("PutObject", claimKey(hash), err)
		}
		info, err := s.Stat(hash)
		if err == nil && replace != nil && info.Size != size {
			if err := replace(); err != nil {
				return Info{}, false, err
			}
			return Info{Hash: hash, Size: size, ModTime: s.now()}, true, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return info, false, err
		}
		created, err := place()
		if err != nil || created {
			return Info{Hash: hash, Size: size, ModTime: s.now()}, created, err
		}
		// Placed again by another Put since the look: claim that one.
	}
}

// claimedSince reports whether a Put claimed blob hash at or after cutoff.
func (s *S3) claimedSince(hash string, cutoff time.Time) (bool, error) {
	b, err := s.readSmall(claimKey(hash))
	if errors.Is(err, ErrNotFound) {
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
func (s *S3) PutSmall(bs ...[]byte) error {
	errs := make([]error, len(bs))
	var wg sync.WaitGroup
	for i, b := range bs {
		wg.Go(func() {
			if int64(len(b)) > s.partSize {
				// Put streams what passes one part as a multipart upload,
				// which needs the hash before the last byte: it is known.
				_, _, errs[i] = s.Put(bytes.NewReader(b), AddressOf(b), 0)
				return
			}
			// The bytes are in hand: no part buffer to fill.
			_, _, errs[i] = s.putOnce(AddressOf(b), b)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Open opens the blob for reading after one HEAD for its Info; reads are
// OpenSized's.
func (s *S3) Open(hash string) (io.ReadSeekCloser, Info, error) {
	info, err := s.Stat(hash)
	if err != nil {
		return nil, Info{}, err
	}
	return &s3Reader{s: s, key: blobKey(hash), size: info.Size}, info, nil
}

// OpenSized opens the blob, whose size the caller knows, without a request:
// the reader's Seek only moves its position, and each Read that starts a
// range sends one GET with explicit bounds (to the blob's end, or to the
// end of the range announced with ReadRange). A blob that turns out to be
// missing fails the first Read with ErrNotFound.
func (s *S3) OpenSized(hash string, size int64) (io.ReadSeekCloser, error) {
	if !ValidHash(hash) {
		return nil, ErrInvalidHash
	}
	if size < 0 {
		return nil, fmt.Errorf("blobs: negative size %d", size)
	}
	return &s3Reader{s: s, key: blobKey(hash), size: size}, nil
}

// Stat returns the blob's Info (one HEAD).
func (s *S3) Stat(hash string) (Info, error) {
	if !ValidHash(hash) {
		return Info{}, ErrInvalidHash
	}
	key := blobKey(hash)
	out, err := s.client.HeadObject(background(), &s3.HeadObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		return Info{}, s3Err("HeadObject", key, err)
	}
	return Info{Hash: hash, Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified)}, nil
}

// Collect removes the blob if it was written before cutoff and no Put
// claimed it since, as *Dir.Collect does. It copies the blob aside,
// deletes it, and only then reads the claim: a Put that found the blob
// stored wrote its claim before looking for the blob, so either this read
// sees the claim (and the blob is copied back) or the Put's look finds the
// blob gone (and the Put places it again). Cutoff is on the clock of the
// claims (S3Options.Now).
func (s *S3) Collect(hash string, cutoff time.Time) (bool, error) {
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
func (s *S3) copyObject(src, dst string, size int64, ifAbsent bool) error {
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

// Remove deletes the blob. It returns ErrInvalidHash or ErrNotFound.
func (s *S3) Remove(hash string) error {
	if _, err := s.Stat(hash); err != nil {
		return err
	}
	return s.deleteObject(blobKey(hash))
}

// Verify re-reads the blob and returns ErrCorrupt if its bytes no longer
// hash to its name.
func (s *S3) Verify(hash string) error {
	if !ValidHash(hash) {
		return ErrInvalidHash
	}
	body, err := s.getObject(blobKey(hash), "")
	if err != nil {
		return err
	}
	defer body.Close()
	h := NewHash()
	if _, err := copyBuffer(h, body); err != nil {
		return err
	}
	if Address(h) != hash {
		return ErrCorrupt
	}
	return nil
}

// list calls fn for every object under prefix, in key order, a page of
// ListObjectsV2 at a time.
func (s *S3) list(prefix string, fn func(types.Object) error) error {
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
func (s *S3) Walk(fn func(Info) error) error {
	return s.list("blob/", func(o types.Object) error {
		hash := strings.TrimPrefix(aws.ToString(o.Key), "blob/")
		if !ValidHash(hash) {
			return nil
		}
		return fn(Info{Hash: hash, Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)})
	})
}

// CleanTemp removes what interrupted work left before olderThan: multipart
// uploads that no partial's record names (a Put cut off by a crash, an
// abandoned record's predecessor), and claim, aside and probe objects.
func (s *S3) CleanTemp(olderThan time.Time) (int, error) {
	stale, err := s.staleTemp(olderThan)
	for i, remove := range stale {
		if err := remove(); err != nil {
			return i, err
		}
	}
	return len(stale), err
}

// StaleTemp counts what CleanTemp(olderThan) would remove, removing nothing.
func (s *S3) StaleTemp(olderThan time.Time) (int, error) {
	stale, err := s.staleTemp(olderThan)
	return len(stale), err
}

func (s *S3) staleTemp(olderThan time.Time) ([]func() error, error) {
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
func (s *S3) CheckWritable() error {
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

// s3Reader reads a blob of known size by ranged GETs, lazily: Seek only
// moves the position, and a Read with no open response (or at a position
// its response does not continue) sends one GET, from the position to the
// end of the range announced by ReadRange, or to the blob's end.
type s3Reader struct {
	s    *S3
	key  string
	size int64
	pos  int64
	next int64 // the length ReadRange announced for the next range, 0 if none

	body    io.ReadCloser // the open response, nil if none
	bodyPos int64         // where body's next byte is
	bodyEnd int64         // where body ends
}

// ReadRange announces that the next n bytes from the current position are
// all the caller will read before it seeks or closes, so the GET that
// fetches them asks for exactly them (server/blobhttp calls it).
func (r *s3Reader) ReadRange(n int64) { r.next = n }

func (r *s3Reader) Read(p []byte) (int, error) {
	if r.pos >= r.size {
		return 0, io.EOF
	}
	if r.body != nil && r.bodyPos != r.pos {
		r.closeBody()
	}
	if r.body == nil {
		end := r.size
		if r.next > 0 {
			end = min(r.pos+r.next, r.size)
			r.next = 0
		}
		body, err := r.s.getRange(r.key, r.pos, end)
		if err != nil {
			return 0, err
		}
		r.body, r.bodyPos, r.bodyEnd = body, r.pos, end
	}
	if int64(len(p)) > r.bodyEnd-r.bodyPos {
		p = p[:r.bodyEnd-r.bodyPos]
	}
	n, err := r.body.Read(p)
	r.pos += int64(n)
	r.bodyPos += int64(n)
	if r.bodyPos == r.bodyEnd {
		// Reading the (empty) rest lets the connection be reused: closed
		// before its end, a response closes its connection, and a new one
		// nearly doubled the time of a 64 KiB range on versitygw.
		io.CopyN(io.Discard, r.body, 512)
		r.closeBody()
		return n, nil
	}
	if err == io.EOF {
		r.closeBody()
		return n, fmt.Errorf("blobs: s3 %s: the response ended at %d of %d: %w", r.key, r.bodyPos, r.bodyEnd, io.ErrUnexpectedEOF)
	}
	return n, err
}

func (r *s3Reader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.pos
	case io.SeekEnd:
		offset += r.size
	default:
		return 0, errors.New("blobs: invalid whence")
	}
	if offset < 0 {
		return 0, errors.New("blobs: negative position")
	}
	r.pos = offset
	return offset, nil
}

func (r *s3Reader) closeBody() {
	if r.body != nil {
		r.body.Close()
		r.body = nil
	}
}

func (r *s3Reader) Close() error {
	r.closeBody()
	return nil
}

// partialRecord is tus/<id>/upload: what OpenPartial needs besides the
// parts and the staging object.
type partialRecord struct {
	UploadID string `json:"upload_id"`
	Hash     string `json:"hash"`
	PartSize int64  `json:"part_size"`
}

func (s *S3) readRecord(id string) (*partialRecord, error) { return s.readRecordKey(recordKey(id)) }

// readRecordKey reads a partial's record; nil when there is none.
func (s *S3) readRecordKey(key string) (*partialRecord, error) {
	b, err := s.readSmall(key)
	if errors.Is(err, ErrNotFound) {
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

// s3Partial is a Partial as a multipart upload to blob/<hash>. Part n holds
// the bytes [(n-1)*P, n*P) for the record's part size P. The bytes past the
// last full part are in memory (buf) until Sync puts them in the staging
// object that starts at that part boundary.
//
// Staging objects are named by where they start, so a Sync whose offset
// the caller then fails to record never overwrites the staging object of
// the offset it did record: that one starts at an earlier boundary, or at
// the same one with fewer bytes (a prefix of the new ones).
type s3Partial struct {
	s     *S3
	id    string
	rec   partialRecord
	parts []types.CompletedPart // parts 1..len, all full, in order
	buf   []byte                // len P; buf[:n] are the bytes from base
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
// object that starts there. Too few bytes is ErrPartialShort.
func (s *S3) OpenPartial(id, hash string, offset int64) (Partial, error) {
	if !validPartialID(id) || strings.ContainsAny(id, "/\\") {
		return nil, fmt.Errorf("blobs: %q cannot name a partial upload", id)
	}
	if !ValidHash(hash) {
		return nil, ErrInvalidHash
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
		return nil, fmt.Errorf("%w: partial %s has no upload, %d bytes acknowledged", ErrPartialShort, id, offset)
	}
	parts, err := s.listParts(*rec)
	if isNoSuchUpload(err) {
		// A Complete finished the upload, and its caller crashed before
		// recording that: the blob holds every byte.
		if _, serr := s.Stat(hash); serr == nil {
			return &s3Partial{s: s, id: id, rec: *rec, completed: true}, nil
		}
		return nil, fmt.Errorf("%w: partial %s's upload is gone", ErrPartialShort, id)
	}
	if err != nil {
		return nil, err
	}
	p := &s3Partial{s: s, id: id, rec: *rec, buf: s.partBuf(rec.PartSize)}
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
		return nil, fmt.Errorf("%w: partial %s holds %d bytes in parts, %d acknowledged", ErrPartialShort, id, base, offset)
	} else if need > 0 {
		body, err := s.getObject(stagingKey(id, base), fmt.Sprintf("bytes=0-%d", need-1))
		if errors.Is(err, ErrNotFound) {
			p.Close()
			return nil, fmt.Errorf("%w: partial %s holds %d bytes, %d acknowledged", ErrPartialShort, id, base, offset)
		}
		if err != nil {
			p.Close()
			return nil, err
		}
		got, err := io.ReadFull(body, p.buf[:need])
		body.Close()
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			p.Close()
			return nil, fmt.Errorf("%w: partial %s holds %d bytes, %d acknowledged", ErrPartialShort, id, base+int64(got), offset)
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
func (s *S3) startPartial(id, hash string, rec *partialRecord) (Partial, error) {
	if rec != nil {
		if _, err := s.listParts(*rec); err == nil {
			return &s3Partial{s: s, id: id, rec: *rec, buf: s.partBuf(rec.PartSize)}, nil
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
	return &s3Partial{s: s, id: id, rec: nrec, buf: s.partBuf(nrec.PartSize)}, nil
}

// partBuf is a part buffer of size n, from the pool when n is the engine's
// part size.
func (s *S3) partBuf(n int64) []byte {
	if n == s.partSize {
		return *s.parts.Get().(*[]byte)
	}
	return make([]byte, n)
}

// listParts lists a partial's uploaded parts in part number order.
func (s *S3) listParts(rec partialRecord) ([]types.Part, error) {
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
		k := copy(p.buf[p.n:], b)
		p.n += int64(k)
		b = b[k:]
		written += k
		if p.n == p.rec.PartSize {
			part, err := p.s.uploadPart(blobKey(p.rec.Hash), p.rec.UploadID, int32(len(p.parts)+1), p.buf)
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
func (p *s3Partial) Complete(hash string) (Info, error) {
	if hash != p.rec.Hash {
		return Info{}, fmt.Errorf("blobs: partial %s is for blob %s, not %s", p.id, p.rec.Hash, hash)
	}
	if p.completed {
		info, err := p.s.Stat(hash)
		if err != nil {
			return Info{}, err
		}
		info, _, err = p.s.claim(hash, info.Size, func() (bool, error) {
			return false, fmt.Errorf("%w: blob %s vanished after its partial completed", ErrPartialShort, hash)
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
			return Info{}, err
		}
		parts = append(slices.Clip(parts), last)
	}
	complete := func() (bool, error) { return p.s.completeUpload(key, p.rec.UploadID, parts, true) }
	created, err := complete()
	if err != nil {
		return Info{}, err
	}
	if created {
		return Info{Hash: hash, Size: size, ModTime: p.s.now()}, nil
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
func (s *S3) PartialSize(id, hash string) (int64, error) {
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
		if errors.Is(err, ErrNotFound) {
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
func (s *S3) RemovePartial(id string) error {
	if !validPartialID(id) || strings.ContainsAny(id, "/\\") {
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
func (s *S3) StalePartials(cutoff time.Time) ([]PartialInfo, error) {
	byID := map[string]*PartialInfo{}
	var ids []string
	err := s.list("tus/", func(o types.Object) error {
		rest := strings.TrimPrefix(aws.ToString(o.Key), "tus/")
		id, name, ok := strings.Cut(rest, "/")
		if !ok || !validPartialID(id) {
			return nil
		}
		p := byID[id]
		if p == nil {
			p = &PartialInfo{ID: id}
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
	var stale []PartialInfo
	for _, id := range ids {
		if p := byID[id]; p.ModTime.Before(cutoff) {
			stale = append(stale, *p)
		}
	}
	return stale, nil
}
