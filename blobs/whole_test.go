package blobs_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"sealbox/blobs"
)

// TestPutReplacesDamagedBlob: a put that finds a file at its address checks
// it before adopting it. A file cut short, or of the right size with other
// bytes, is replaced by the new bytes (created, with their size) instead of
// being recorded as the blob; a whole one is claimed. Each way a put reaches
// the address is covered: Put, PutSmall's group, Adopt and a partial's
// Complete.
func TestPutReplacesDamagedBlob(t *testing.T) {
	data := bytes.Repeat([]byte("genuine ciphertext "), 5000)
	hash := blobs.AddressOf(data)
	damages := map[string][]byte{
		"truncated":   []byte("JUNK"),
		"same length": bytes.Repeat([]byte("x"), len(data)),
	}
	puts := map[string]func(t *testing.T, s *blobs.Dir) (blobs.Info, error){
		"Put": func(t *testing.T, s *blobs.Dir) (blobs.Info, error) {
			info, created, err := s.Put(bytes.NewReader(data), hash, 0)
			if err == nil && !created {
				t.Error("Put over a damaged file: created = false")
			}
			return info, err
		},
		"PutSmall": func(t *testing.T, s *blobs.Dir) (blobs.Info, error) {
			if err := s.PutSmall(data, []byte("another")); err != nil {
				return blobs.Info{}, err
			}
			return s.Stat(hash)
		},
		"Adopt": func(t *testing.T, s *blobs.Dir) (blobs.Info, error) {
			info, _, err := s.Adopt(writePartial(t, s, "adopted", data), hash)
			return info, err
		},
		"Complete": func(t *testing.T, s *blobs.Dir) (blobs.Info, error) {
			p, err := s.OpenPartial("completed", hash, 0)
			if err != nil {
				return blobs.Info{}, err
			}
			defer p.Close()
			mustWrite(t, p, data)
			return p.Complete(hash)
		},
	}
	for dname, damage := range damages {
		for pname, put := range puts {
			t.Run(dname+"/"+pname, func(t *testing.T) {
				s := MustOpenStore(t)
				if _, _, err := s.PutBytes(data); err != nil {
					t.Fatal(err)
				}
				// Rewritten in place, as a write through a second name would.
				path := filepath.Join(s.Path(), hash[:2], hash[2:4], hash)
				if err := os.WriteFile(path, damage, 0o600); err != nil {
					t.Fatal(err)
				}
				info, err := put(t, s)
				if err != nil || info.Size != int64(len(data)) {
					t.Fatalf("%s over a damaged file = %+v, %v; want size %d", pname, info, err, len(data))
				}
				if err := s.Verify(hash); err != nil {
					t.Fatalf("after %s the blob is still damaged: %v", pname, err)
				}
			})
		}
	}
}
