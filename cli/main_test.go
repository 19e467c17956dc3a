package cli

import (
	"os"
	"testing"

	"sealbox/blobs/s3test"
	"sealbox/kv/pgtest"
)

// TestMain stops the PostgreSQL cluster and the S3 gateway a test started
// (SEALBOX_TEST_PG=1, SEALBOX_TEST_S3=1).
func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.Stop()
	s3test.Stop()
	os.Exit(code)
}
