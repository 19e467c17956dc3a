package kv_test

import (
	"bytes"
	"testing"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/kv/kvtest"
)

// TestDirectory: the first publish pins the key; versions only go up; a
// refusal stores and logs nothing; each publish gets the next log index.
func TestDirectory(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	a := mustAccount(t, s, c, 1)
	if _, err := s.Directory(a.ID); fault.ErrorCode(err) != fault.ECodeDirectoryNotFound {
		t.Fatalf("before a publish: %v", err)
	}
	key := []byte("identity key")
	d := &kv.Directory{Version: 2, Bytes: []byte("v2"), IdentityKey: key}
	if err := s.PublishDirectory(a.ID, d, kv.PublishLimit{}); err != nil || d.LogIndex != 0 {
		t.Fatalf("first publish: index %d, %v", d.LogIndex, err)
	}
	err := s.PublishDirectory(a.ID, &kv.Directory{Version: 2, Bytes: []byte("v2 again"), IdentityKey: key}, kv.PublishLimit{})
	var e *fault.Error
	if fault.ErrorCode(err) != fault.ECodeDirectoryVersionConflict || !asError(err, &e) || e.Details["stored"] != uint64(2) {
		t.Fatalf("the same version: %v", err)
	}
	if err := s.PublishDirectory(a.ID, &kv.Directory{Version: 3, Bytes: []byte("v3"), IdentityKey: []byte("thief")}, kv.PublishLimit{}); fault.ErrorCode(err) != fault.ECodeIdentityKeyMismatch {
		t.Fatalf("another key: %v", err)
	}
	if tree, _ := s.LogTree(); tree.N != 1 {
		t.Fatalf("refusals logged: the log holds %d records", tree.N)
	}
	d3 := &kv.Directory{Version: 3, Bytes: []byte("v3"), IdentityKey: key}
	if err := s.PublishDirectory(a.ID, d3, kv.PublishLimit{}); err != nil || d3.LogIndex != 1 {
		t.Fatalf("a newer version: index %d, %v", d3.LogIndex, err)
	}
	got, err := s.Directory(a.ID)
	if err != nil || got.Version != 3 || !bytes.Equal(got.Bytes, []byte("v3")) || !bytes.Equal(got.IdentityKey, key) || got.LogIndex != 1 {
		t.Fatalf("read back: %+v %v", got, err)
	}
}
