package s3_test

import (
	"bytes"
	"io"
	"testing"

	"sealbox/blobs"
	"sealbox/blobs/blobstest"
	"sealbox/blobs/s3"
	"sealbox/blobs/s3test"
)

// BenchmarkS3Range64KiB: a 64 KiB range of a blob of known size on the S3
// server (SEALBOX_TEST_S3): one ranged GET, on a reused connection.
func BenchmarkS3Range64KiB(b *testing.B) {
	s := openS3b(b)
	data := blobstest.Bytes(8<<20, 1)
	info, _, err := s.Put(bytes.NewReader(data), blobs.AddressOf(data), 0)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for b.Loop() {
		f, _ := s.OpenSized(info.Hash, info.Size)
		f.Seek(1<<20, io.SeekStart)
		f.(interface{ ReadRange(int64) }).ReadRange(64 << 10)
		if _, err := io.ReadFull(f, buf); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

// openS3b opens a fresh bucket of the test server for a benchmark,
// skipping without one.
func openS3b(b *testing.B) *s3.Engine {
	if !s3test.Enabled() {
		b.Skip("SEALBOX_TEST_S3 is unset")
	}
	return s3test.Open(b, s3.Options{})
}
