package s3_test

import (
	"bytes"
	"testing"

	"sealbox/blobs"
	"sealbox/blobs/blobstest"
	"sealbox/blobs/s3"
	"sealbox/blobs/s3test"
)

// TestPartialHoldsWhatItReserves: a partial's buffer grows with the bytes
// of the part under way, never past what WriteBuffer told for its offset
// and the bytes written, so the server's reservation of a small transfer's
// PATCH is what the PATCH holds (issue 41: an 8 MiB part for 64 KiB).
func TestPartialHoldsWhatItReserves(t *testing.T) {
	if !s3test.Enabled() {
		t.Skip("SEALBOX_TEST_S3 is unset")
	}
	const part = 5 << 20
	e := s3test.Open(t, s3.Options{PartSize: part})
	data := blobstest.Bytes(part+300<<10, 7)
	hash := blobs.AddressOf(data)
	write := func(offset, n int64) {
		t.Helper()
		p, err := e.OpenPartial("buffer-test", hash, offset)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		for off := offset; off < offset+n; off += 10 << 10 {
			if _, err := p.Write(data[off:min(off+10<<10, offset+n)]); err != nil {
				t.Fatal(err)
			}
			if held, told := s3.PartialBuffer(p), e.WriteBuffer(offset, n); held > told {
				t.Fatalf("at %d of %d bytes from %d: holds %d, told %d", off, n, offset, held, told)
			}
		}
		if err := p.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	write(0, 100<<10)
	if told := e.WriteBuffer(0, 100<<10); told != 128<<10 {
		t.Errorf("100 KiB from 0: told %d, want 128 KiB", told)
	}
	write(100<<10, part) // the staged 100 KiB read back, then past a part
	write(part+100<<10, 200<<10)
	p, err := e.OpenPartial("buffer-test", hash, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Complete(hash); err != nil {
		t.Fatal(err)
	}
	p.Close()
	f, _, err := e.Open(hash)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got bytes.Buffer
	got.ReadFrom(f)
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatal("the completed blob is not the bytes written")
	}
}
