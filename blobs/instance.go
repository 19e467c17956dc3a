package blobs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"sealbox/kv/durable"
)

// InstanceMarker is the name of the marker at a blob store's root (a file in
// the blobs directory, an object at the bucket's root) that holds the id of
// the sealbox instance whose blobs it keeps. The record store keeps the same
// id, so a command given the store of one instance and the blob store of
// another (gc would delete every blob the store does not record) is refused.
// The marker is written once and never changed; a copy of the blob store
// made with the files (cp, rclone) carries it along.
const InstanceMarker = "sealbox-instance"

// ErrMarked refuses to mark a blob store that already holds another
// instance's marker.
var ErrMarked = errors.New("the blob store already belongs to another instance")

// maxMarker bounds what a marker read takes: an id is a few dozen bytes.
const maxMarker = 256

// ParseMarker returns the id a marker's bytes hold.
func ParseMarker(b []byte, where string) (string, error) {
	id := strings.TrimSpace(string(b))
	if id == "" || len(b) >= maxMarker || strings.ContainsAny(id, " \t\r\n") {
		return "", fmt.Errorf("blobs: %s does not hold an instance id", where)
	}
	return id, nil
}

// Instance is Engine.Instance.
func (s *Dir) Instance() (string, error) {
	path := filepath.Join(s.dir, InstanceMarker)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return ParseMarker(b, path)
}

// MarkInstance is Engine.MarkInstance; "only if the store has none" is
// O_EXCL.
func (s *Dir) MarkInstance(id string) error {
	path := filepath.Join(s.dir, InstanceMarker)
	tmp, err := os.CreateTemp(s.tmp, "marker-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(id + "\n")
	err = durable.Close(tmp, err)
	if err != nil {
		return err
	}
	// link(2) places the whole file or nothing, and fails when the name
	// exists: two nodes marking at once leave one marker.
	if err := os.Link(tmp.Name(), path); errors.Is(err, fs.ErrExist) {
		return s.sameMarker(id)
	} else if err != nil {
		return err
	}
	return durable.SyncDir(s.dir)
}

// sameMarker is nil when the store's marker holds id, ErrMarked otherwise.
func (s *Dir) sameMarker(id string) error {
	have, err := s.Instance()
	if err != nil {
		return err
	}
	if have != id {
		return fmt.Errorf("%w: %s holds instance %s, not %s", ErrMarked, filepath.Join(s.dir, InstanceMarker), have, id)
	}
	return nil
}

// errStopWalk ends HoldsBlobs' walk at the first blob.
var errStopWalk = errors.New("blobs: stop walk")

// HoldsBlobs reports whether the engine holds at least one blob.
func HoldsBlobs(e Engine) (bool, error) {
	found := false
	err := e.Walk(func(Info) error {
		found = true
		return errStopWalk
	})
	if errors.Is(err, errStopWalk) || errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	return found, err
}
