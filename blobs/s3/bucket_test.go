package s3_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"sealbox/blobs"
	"sealbox/blobs/s3"
	"sealbox/blobs/s3test"
)

// wantSentence fails unless err is one sentence saying each of want, with
// none of the client's request dump.
func wantSentence(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one saying %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	for _, dump := range []string{"operation error", "RequestID", "https response error", "api error"} {
		if strings.Contains(err.Error(), dump) {
			t.Errorf("error %q carries the client's dump (%q)", err, dump)
		}
	}
}

// TestOpenS3SaysWhatIsWrong: a bucket that does not answer, one whose
// credentials are refused and one that is missing are each refused in one
// sentence naming the bucket and the endpoint.
func TestOpenS3SaysWhatIsWrong(t *testing.T) {
	ctx := context.Background()
	_, err := s3.Open(ctx, "s3://photos?endpoint=http://127.0.0.1:1", s3.Options{AccessKeyID: "id", SecretAccessKey: "secret"})
	wantSentence(t, err, `bucket "photos" at http://127.0.0.1:1`, "does not answer")
	if !s3test.Enabled() {
		t.Skip("SEALBOX_TEST_S3 is unset: the answers of a server are not tried")
	}
	u, _ := url.Parse(s3test.URL(t))
	endpoint := u.Query().Get("endpoint")
	missing := "s3://no-such-bucket-here?endpoint=" + endpoint
	_, err = s3.Open(ctx, u.String(), s3.Options{AccessKeyID: "nobody", SecretAccessKey: "wrong-secret"})
	wantSentence(t, err, `bucket "`+u.Host+`" at `+endpoint, "refuses the credentials")
	_, err = s3.Open(ctx, missing, s3.Options{})
	wantSentence(t, err, `bucket "no-such-bucket-here" does not exist at `+endpoint)
	_, err = s3.Open(ctx, missing, s3.Options{AccessKeyID: "nobody", SecretAccessKey: "wrong-secret", CreateBucket: true})
	wantSentence(t, err, `bucket "no-such-bucket-here" at `+endpoint, "refuses the credentials")
}

// TestOpenS3CreatesAMissingBucket: with CreateBucket a missing bucket is
// created, and CreatedBucket says so; an existing one is used as it is.
func TestOpenS3CreatesAMissingBucket(t *testing.T) {
	if !s3test.Enabled() {
		t.Skip("SEALBOX_TEST_S3 is unset")
	}
	u, _ := url.Parse(s3test.URL(t))
	u.Host = u.Host + "-new"
	s, err := s3.Open(context.Background(), u.String(), s3.Options{CreateBucket: true})
	if err != nil || !s.CreatedBucket() {
		t.Fatalf("open a missing bucket with CreateBucket: %v, created %v", err, s != nil && s.CreatedBucket())
	}
	if _, err := s.Stat(strings.Repeat("a", 64)); !errors.Is(err, blobs.ErrNotFound) {
		t.Fatalf("the created bucket: %v", err)
	}
	again, err := s3.Open(context.Background(), u.String(), s3.Options{CreateBucket: true})
	if err != nil || again.CreatedBucket() {
		t.Fatalf("open the bucket again: %v, created %v", err, again != nil && again.CreatedBucket())
	}
}

// TestInstanceMarker: an unmarked store reads "", is marked once, accepts
// the same id again and refuses another, on each engine.
func TestInstanceMarker(t *testing.T) {
	engines := map[string]blobs.Engine{}
	local, err := blobs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	engines["local"] = local
	if s3test.Enabled() {
		engines["s3"] = s3test.Open(t, s3.Options{})
	}
	for name, e := range engines {
		t.Run(name, func(t *testing.T) {
			if id, err := e.Instance(); err != nil || id != "" {
				t.Fatalf("an unmarked store: %q %v", id, err)
			}
			if err := e.MarkInstance("instance-a"); err != nil {
				t.Fatal(err)
			}
			if err := e.MarkInstance("instance-a"); err != nil {
				t.Fatalf("the same id again: %v", err)
			}
			if err := e.MarkInstance("instance-b"); !errors.Is(err, blobs.ErrMarked) {
				t.Fatalf("another id: %v, want ErrMarked", err)
			}
			if id, err := e.Instance(); err != nil || id != "instance-a" {
				t.Fatalf("the marker: %q %v", id, err)
			}
			if held, err := blobs.HoldsBlobs(e); err != nil || held {
				t.Fatalf("a store holding only its marker holds blobs: %v %v", held, err)
			}
		})
	}
}
