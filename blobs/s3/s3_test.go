package s3_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"sealbox/blobs"
	"sealbox/blobs/blobstest"
	"sealbox/blobs/s3"
	"sealbox/blobs/s3test"
)

func TestParseS3URL(t *testing.T) {
	for _, tc := range []struct {
		raw                      string
		bucket, endpoint, region string
		err                      string // a part of the error, "" for none
	}{
		{raw: "s3://photos", bucket: "photos", region: "us-east-1"},
		{raw: "s3://photos/", bucket: "photos", region: "us-east-1"},
		{raw: "s3://my.photos-1?endpoint=http://127.0.0.1:9000&region=eu-west-3", bucket: "my.photos-1", endpoint: "http://127.0.0.1:9000", region: "eu-west-3"},
		{raw: "s3://photos?endpoint=https://s3.example.org/", bucket: "photos", endpoint: "https://s3.example.org", region: "us-east-1"},
		{raw: "https://photos", err: "must start with s3://"},
		{raw: "s3://", err: "not an S3 bucket name"},
		{raw: "s3://ab", err: "not an S3 bucket name"},
		{raw: "s3://Photos", err: "not an S3 bucket name"},
		{raw: "s3://-photos", err: "not an S3 bucket name"},
		{raw: "s3://photos/prefix", err: "names a bucket only"},
		{raw: "s3://photos:9000", err: "names a bucket only"},
		{raw: "s3://key:secret@photos", err: "must not hold credentials"},
		{raw: "s3://photos?endpoint=ftp://x", err: "endpoint must be"},
		{raw: "s3://photos?endpoint=http://u:p@x", err: "endpoint must be"},
		{raw: "s3://photos?endpoint=http://x/path", err: "endpoint must be"},
		{raw: "s3://photos?region=", err: "region must be"},
		{raw: "s3://photos?region=us-east-1&region=eu-west-1", err: "more than once"},
		{raw: "s3://photos?secret=x", err: `unknown parameter "secret"`},
		{raw: "s3://photos?%zz", err: "do not parse"},
	} {
		bucket, endpoint, region, err := s3.ParseURL(tc.raw)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseURL(%q) = %v, want an error with %q", tc.raw, err, tc.err)
			}
			continue
		}
		if err != nil || bucket != tc.bucket || endpoint != tc.endpoint || region != tc.region {
			t.Errorf("ParseURL(%q) = %q, %q, %q, %v; want %q, %q, %q", tc.raw, bucket, endpoint, region, err, tc.bucket, tc.endpoint, tc.region)
		}
	}
}

// FuzzParseS3URL: the parser never panics, never echoes a URL's
// credentials in its errors, and what it accepts it accepts again when
// rebuilt from its parts.
func FuzzParseS3URL(f *testing.F) {
	f.Add("s3://photos?endpoint=http://127.0.0.1:9000&region=eu-west-3")
	f.Add("s3://key:hunter2@photos")
	f.Add("s3://photos?endpoint=http://u:hunter2@x")
	f.Add("s3://a.b-c?region=x&endpoint=https://[::1]:1")
	f.Add("s3://photos?%zz")
	f.Fuzz(func(t *testing.T, raw string) {
		bucket, endpoint, region, err := s3.ParseURL(raw)
		if err != nil {
			if u, perr := url.Parse(raw); perr == nil && u.User != nil {
				if p, ok := u.User.Password(); ok && len(p) > 3 && strings.Contains(err.Error(), p) {
					t.Fatalf("error %q repeats the password", err)
				}
			}
			return
		}
		again := "s3://" + bucket + "?region=" + url.QueryEscape(region)
		if endpoint != "" {
			again += "&endpoint=" + url.QueryEscape(endpoint)
		}
		b2, e2, r2, err := s3.ParseURL(again)
		if err != nil || b2 != bucket || e2 != endpoint || r2 != region {
			t.Fatalf("%q parsed to %q %q %q; rebuilt %q gives %q %q %q, %v", raw, bucket, endpoint, region, again, b2, e2, r2, err)
		}
	})
}

func TestOpenS3Refuses(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	_, err := s3.Open(context.Background(), "s3://photos?endpoint=http://127.0.0.1:1", s3.Options{})
	if err == nil || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
		t.Errorf("Open without credentials = %v", err)
	}
	_, err = s3.Open(context.Background(), "s3://photos?endpoint=http://127.0.0.1:1", s3.Options{AccessKeyID: "id", SecretAccessKey: "hunter2-secret", PartSize: 1})
	if err == nil || !strings.Contains(err.Error(), "part size") {
		t.Errorf("Open with 1-byte parts = %v", err)
	}
}

// openS3 opens a fresh bucket of the test server, skipping without one.
func openS3(t *testing.T, opts s3.Options) *s3.Engine {
	t.Helper()
	if !s3test.Enabled() {
		t.Skip("SEALBOX_TEST_S3 is unset")
	}
	if opts.PartSize == 0 {
		opts.PartSize = 5 << 20
	}
	return s3test.Open(t, opts)
}

// TestS3ServerChecksBytes: the S3 server itself refuses bytes that do not
// match the x-amz-checksum-sha256 sent with them, whole objects and parts,
// so a Put whose own hashing failed would still store nothing.
func TestS3ServerChecksBytes(t *testing.T) {
	s := openS3(t, s3.Options{})
	data := []byte("the real bytes")
	hash := blobs.AddressOf(data)
	wrong := s3.Checksum([]byte("other bytes"))
	if err := s.PutRaw(hash, data, wrong); testing.Verbose() {
		t.Logf("PutObject with a wrong checksum: %v", err)
	}
	if err := s.PutRaw(hash, data, wrong); !errors.Is(err, blobs.ErrHashMismatch) {
		t.Errorf("PutObject with a wrong checksum = %v, want ErrHashMismatch", err)
	}
	if _, err := s.Stat(hash); !errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("after a refused PutObject, Stat = %v", err)
	}
	if err := s.UploadPartRaw(hash, data, wrong); !errors.Is(err, blobs.ErrHashMismatch) {
		t.Errorf("UploadPart with a wrong checksum = %v, want ErrHashMismatch", err)
	}
	if err := s.PutRaw(hash, data, s3.Checksum(data)); err != nil {
		t.Errorf("PutObject with the right checksum = %v", err)
	}
}

// requestLog records S3 requests by operation (s3.Options.Observe).
type requestLog struct {
	mu  sync.Mutex
	ops []string
}

func (l *requestLog) observe(op string, _ time.Duration, _ error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ops = append(l.ops, op)
}

func (l *requestLog) take() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ops := strings.Join(l.ops, " ")
	l.ops = nil
	return ops
}

// TestS3Requests pins the requests each operation sends: a read of a known
// size sends no HEAD and one GET per range, a Put of a stored blob claims
// it and looks once.
func TestS3Requests(t *testing.T) {
	log := &requestLog{}
	s := openS3(t, s3.Options{Observe: log.observe})
	data := blobstest.Bytes(1000, 1)
	hash := blobs.AddressOf(data)
	log.take()
	for _, tc := range []struct {
		name string
		do   func() error
		want string
	}{
		{"put new", func() error { _, _, err := s.Put(bytes.NewReader(data), hash, 0); return err }, "PutObject"},
		{"put stored", func() error { _, _, err := s.Put(bytes.NewReader(data), hash, 0); return err }, "PutObject PutObject HeadObject"},
		{"open sized, seek, read two ranges", func() error {
			f, err := s.OpenSized(hash, int64(len(data)))
			if err != nil {
				return err
			}
			defer f.Close()
			f.Seek(10, io.SeekStart)
			f.(interface{ ReadRange(int64) }).ReadRange(5)
			if _, err := io.ReadFull(f, make([]byte, 5)); err != nil {
				return err
			}
			f.Seek(900, io.SeekStart)
			_, err = io.ReadAll(f)
			return err
		}, "GetObject GetObject"},
		{"open sized, seek only", func() error {
			f, err := s.OpenSized(hash, int64(len(data)))
			if err != nil {
				return err
			}
			f.Seek(0, io.SeekEnd)
			return f.Close()
		}, ""},
		{"stat", func() error { _, err := s.Stat(hash); return err }, "HeadObject"},
	} {
		if err := tc.do(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := log.take(); got != tc.want {
			t.Errorf("%s sent %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestS3CollectCopiesInParts: Collect moves aside a blob too large for one
// CopyObject (5 GiB on S3; 5 MiB here) with a multipart copy, and a
// conditional copy (Collect's copy back) never replaces an object, whatever
// its size: versitygw v1.8.0 ignores If-None-Match on CopyObject, which
// this test caught.
func TestS3CollectCopiesInParts(t *testing.T) {
	s := openS3(t, s3.Options{})
	s.SetCopySize(5 << 20)
	data := blobstest.Bytes(11<<20, 2)
	info, _, err := s.Put(bytes.NewReader(data), blobs.AddressOf(data), 0)
	if err != nil {
		t.Fatal(err)
	}
	other := blobs.AddressOf([]byte("copy target"))
	if err := s.CopyBlob(info.Hash, other, info.Size, true); err != nil {
		t.Fatalf("multipart copy: %v", err)
	}
	if err := s.CopyBlob(info.Hash, other, info.Size, true); err == nil {
		t.Fatal("a conditional multipart copy replaced an object")
	}
	s.SetCopySize(1 << 30)
	if err := s.CopyBlob(info.Hash, other, info.Size, true); err == nil {
		t.Fatal("a conditional copy small enough for one CopyObject replaced an object")
	}
	s.SetCopySize(5 << 20)
	f, _, err := s.Open(other)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(f)
	f.Close()
	if !bytes.Equal(got, data) {
		t.Fatal("the multipart copy differs")
	}
	if removed, err := s.Collect(info.Hash, time.Now().Add(time.Hour)); err != nil || !removed {
		t.Fatalf("Collect = %v, %v", removed, err)
	}
	if n, err := s.StaleTemp(time.Now().Add(time.Hour)); err != nil || n != 0 {
		t.Errorf("Collect left %d temp objects (%v)", n, err)
	}
}

// TestS3CleanTempAbortsOrphanUploads: CleanTemp aborts a multipart upload
// no partial names (a Put cut off by a crash) and keeps a live partial's.
func TestS3CleanTempAbortsOrphanUploads(t *testing.T) {
	s := openS3(t, s3.Options{})
	data := blobstest.Bytes(6<<20, 3)
	hash := blobs.AddressOf(data)
	p, err := s.OpenPartial("live", hash, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write(data[:5<<20]); err != nil {
		t.Fatal(err)
	}
	p.Sync()
	p.Close()
	orphan := blobs.AddressOf([]byte("orphan"))
	if err := s.UploadPartRaw(orphan, []byte("x"), s3.Checksum([]byte("x"))); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if n, err := s.StaleTemp(later); err != nil || n != 1 {
		t.Fatalf("StaleTemp = %d, %v; want the orphan upload", n, err)
	}
	if n, err := s.CleanTemp(later); err != nil || n != 1 {
		t.Fatalf("CleanTemp = %d, %v", n, err)
	}
	if n, err := s.StaleTemp(later); err != nil || n != 0 {
		t.Fatalf("after CleanTemp, StaleTemp = %d, %v", n, err)
	}
	p, err = s.OpenPartial("live", hash, 5<<20)
	if err != nil {
		t.Fatalf("the live partial after CleanTemp: %v", err)
	}
	if _, err := p.Write(data[5<<20:]); err != nil {
		t.Fatal(err)
	}
	p.Sync()
	if _, err := p.Complete(hash); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if err := s.Verify(hash); err != nil {
		t.Fatal(err)
	}
}

// TestS3CollectPutInterleavings runs a Put of a stored blob inside each
// window of Collect, and a Collect inside the Put's, for one-part and
// multipart blobs: whatever the order, the Put succeeds and the blob stays.
func TestS3CollectPutInterleavings(t *testing.T) {
	for _, size := range []int{100, 6 << 20} {
		for _, tc := range []struct {
			name  string
			pause string // the step at which the other operation runs
			inPut bool   // Collect runs inside Put (else Put inside Collect)
		}{
			{"put while collect holds the copy aside", "aside", false},
			{"put after collect deleted, before it reads the claim", "deleted", false},
			{"collect after put found the blob, before its claim", "claim", true},
		} {
			t.Run(fmt.Sprintf("%d/%s", size, tc.name), func(t *testing.T) {
				s := openS3(t, s3.Options{})
				data := blobstest.Bytes(size, uint64(size))
				hash := blobs.AddressOf(data)
				if _, _, err := s.Put(bytes.NewReader(data), hash, 0); err != nil {
					t.Fatal(err)
				}
				cutoff := time.Now()
				var inner error
				ran := false
				s.SetPause(func(step string) {
					if step != tc.pause || ran {
						return
					}
					ran = true
					if tc.inPut {
						_, inner = s.Collect(hash, cutoff)
					} else {
						_, _, inner = s.Put(bytes.NewReader(data), hash, 0)
					}
				})
				var err error
				if tc.inPut {
					_, _, err = s.Put(bytes.NewReader(data), hash, 0)
				} else {
					_, err = s.Collect(hash, cutoff)
				}
				if err != nil || inner != nil || !ran {
					t.Fatalf("outer %v, inner %v, ran %v", err, inner, ran)
				}
				if err := s.Verify(hash); err != nil {
					t.Fatalf("after a successful Put, Verify = %v", err)
				}
			})
		}
	}
}

// TestS3PartialKeepsItsPartSize: a node configured with another part size
// resumes a transfer in the part size the transfer was started with.
func TestS3PartialKeepsItsPartSize(t *testing.T) {
	if !s3test.Enabled() {
		t.Skip("SEALBOX_TEST_S3 is unset")
	}
	url := s3test.URL(t)
	open := func(partSize int64) *s3.Engine {
		s, err := s3.Open(context.Background(), url, s3.Options{PartSize: partSize})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	data := blobstest.Bytes(13<<20, 4)
	hash := blobs.AddressOf(data)
	p, err := open(5<<20).OpenPartial("sized", hash, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, chunk := range [][]byte{data[:4<<20], data[4<<20 : 7<<20]} {
		if _, err := p.Write(chunk); err != nil {
			t.Fatal(err)
		}
		if err := p.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	p.Close()
	p, err = open(6<<20).OpenPartial("sized", hash, 7<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write(data[7<<20:]); err != nil {
		t.Fatal(err)
	}
	if err := p.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Complete(hash); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if err := open(0).Verify(hash); err != nil {
		t.Fatal(err)
	}
}

// TestS3ConcurrentReadinessProbes: readiness probes running at once (a
// load balancer and a monitor polling several nodes) all pass; each puts
// and deletes an object of its own.
func TestS3ConcurrentReadinessProbes(t *testing.T) {
	if !s3test.Enabled() {
		t.Skip("SEALBOX_TEST_S3 is not set")
	}
	s := s3test.Open(t, s3.Options{})
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 20 {
				if err := s.CheckWritable(); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestS3PutReplacesDamagedBlob: an object at a blob's key whose size is not
// that of the bytes hashing to the name (something other than this engine
// wrote it) is replaced by a Put of the genuine bytes, one request or
// multipart, and by a partial's Complete, instead of being claimed.
func TestS3PutReplacesDamagedBlob(t *testing.T) {
	s := openS3(t, s3.Options{})
	junk := []byte("JUNK")
	for _, size := range []int{1000, 6 << 20} {
		data := blobstest.Bytes(size, 21)
		hash := blobs.AddressOf(data)
		for _, via := range []string{"Put", "Complete"} {
			if err := s.PutRaw(hash, junk, s3.Checksum(junk)); err != nil {
				t.Fatal(err)
			}
			var info blobs.Info
			var err error
			if via == "Put" {
				info, _, err = s.Put(bytes.NewReader(data), hash, 0)
			} else {
				var p blobs.Partial
				if p, err = s.OpenPartial("damaged", hash, 0); err != nil {
					t.Fatal(err)
				}
				if _, err = p.Write(data); err == nil {
					info, err = p.Complete(hash)
				}
				p.Close()
				s.RemovePartial("damaged")
			}
			if err != nil || info.Size != int64(size) {
				t.Fatalf("%s of %d bytes over a damaged object = %+v, %v", via, size, info, err)
			}
			if err := s.Verify(hash); err != nil {
				t.Fatalf("%s of %d bytes left the damaged object: %v", via, size, err)
			}
		}
	}
}
