package s3_test

import (
	"os"
	"testing"

	"sealbox/blobs"
	"sealbox/blobs/blobstest"
	"sealbox/blobs/s3"
	"sealbox/blobs/s3test"
)

func TestMain(m *testing.M) {
	code := m.Run()
	s3test.Stop()
	os.Exit(code)
}

// TestS3Engine holds the S3 engine to the engine contract on a real S3
// server (SEALBOX_TEST_S3), with 5 MiB parts, S3's smallest, so the
// contract's sizes cross part boundaries.
func TestS3Engine(t *testing.T) {
	if !s3test.Enabled() {
		t.Skip("SEALBOX_TEST_S3 is unset")
	}
	blobstest.Run(t, func(t *testing.T) (blobs.Engine, func() blobs.Engine) {
		url := s3test.URL(t)
		open := func() blobs.Engine {
			s, err := s3.Open(t.Context(), url, s3.Options{PartSize: 5 << 20})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		return open(), open
	})
}
