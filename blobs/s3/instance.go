package s3

import (
	"errors"
	"fmt"

	"sealbox/blobs"
)

// Instance returns the id in the bucket's instance marker object, or ""
// when the bucket has none.
func (s *Engine) Instance() (string, error) {
	b, err := s.readSmall(blobs.InstanceMarker)
	if errors.Is(err, blobs.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return blobs.ParseMarker(b, fmt.Sprintf("the object %s of bucket %s", blobs.InstanceMarker, s.bucket))
}

// MarkInstance writes the instance marker object holding id, only if the
// bucket has none (If-None-Match: *). A bucket already marked with id is
// left as it is; one marked with another id is refused: blobs.ErrMarked.
func (s *Engine) MarkInstance(id string) error {
	err := s.putObject(blobs.InstanceMarker, []byte(id+"\n"), true)
	if isPreconditionFailed(err) {
		have, err := s.Instance()
		if err != nil {
			return err
		}
		if have != id {
			return fmt.Errorf("%w: the bucket %s holds instance %s, not %s", blobs.ErrMarked, s.bucket, have, id)
		}
		return nil
	}
	return s3Err("PutObject", blobs.InstanceMarker, err)
}
