package s3

import (
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"sealbox/blobs"
)

// Open opens the blob for reading after one HEAD for its blobs.Info; reads are
// OpenSized's.
func (s *Engine) Open(hash string) (io.ReadSeekCloser, blobs.Info, error) {
	info, err := s.Stat(hash)
	if err != nil {
		return nil, blobs.Info{}, err
	}
	return &s3Reader{s: s, key: blobKey(hash), size: info.Size}, info, nil
}

// OpenSized opens the blob, whose size the caller knows, without a request:
// the reader's Seek only moves its position, and each Read that starts a
// range sends one GET with explicit bounds (to the blob's end, or to the
// end of the range announced with ReadRange). A blob that turns out to be
// missing fails the first Read with blobs.ErrNotFound.
func (s *Engine) OpenSized(hash string, size int64) (io.ReadSeekCloser, error) {
	if !blobs.ValidHash(hash) {
		return nil, blobs.ErrInvalidHash
	}
	if size < 0 {
		return nil, fmt.Errorf("blobs: negative size %d", size)
	}
	return &s3Reader{s: s, key: blobKey(hash), size: size}, nil
}

// Stat returns the blob's blobs.Info (one HEAD).
func (s *Engine) Stat(hash string) (blobs.Info, error) {
	if !blobs.ValidHash(hash) {
		return blobs.Info{}, blobs.ErrInvalidHash
	}
	key := blobKey(hash)
	out, err := s.client.HeadObject(background(), &s3.HeadObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		return blobs.Info{}, s3Err("HeadObject", key, err)
	}
	return blobs.Info{Hash: hash, Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified)}, nil
}

// Verify re-reads the blob and returns blobs.ErrCorrupt if its bytes no longer
// hash to its name.
func (s *Engine) Verify(hash string) error {
	if !blobs.ValidHash(hash) {
		return blobs.ErrInvalidHash
	}
	body, err := s.getObject(blobKey(hash), "")
	if err != nil {
		return err
	}
	defer body.Close()
	h := blobs.NewHash()
	if _, err := blobs.CopyBuffer(h, body); err != nil {
		return err
	}
	if blobs.Address(h) != hash {
		return blobs.ErrCorrupt
	}
	return nil
}

// s3Reader reads a blob of known size by ranged GETs, lazily: Seek only
// moves the position, and a Read with no open response (or at a position
// its response does not continue) sends one GET, from the position to the
// end of the range announced by ReadRange, or to the blob's end.
type s3Reader struct {
	s    *Engine
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
