package kv

import (
	"path/filepath"
	"testing"
	"time"

	"sealbox/kv/fault"
)

// TestMigrateRunsEachStepOnce: a step another node already recorded (the
// format read inside the step's own transaction is its target or later) is
// skipped, so nodes that start together on one old store migrate it once.
func TestMigrateRunsEachStepOnce(t *testing.T) {
	s, err := openFile(filepath.Join(t.TempDir(), "sealbox.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var applied bool
	step := []Migration{{To: FormatVersion, Name: "counted", apply: func(Tx, time.Time) error {
		applied = true
		return nil
	}}}
	if err := s.migrate(step); err != nil || applied {
		t.Fatalf("a step at the store's own format: err %v, applied %v; want it skipped", err, applied)
	}
	if err := s.update(func(tx Tx) error { return writeFormat(tx, FormatVersion-1) }); err != nil {
		t.Fatal(err)
	}
	if err := s.migrate(step); err != nil || !applied {
		t.Fatalf("a pending step: err %v, applied %v; want it run", err, applied)
	}
	if v, _, err := s.Format(); err != nil || v != FormatVersion {
		t.Fatalf("format after the step: %d, %v", v, err)
	}
}

// TestMigrateUploadsByAccount: a format 4 store's open sessions join the
// per-account index, so the cap on open sessions counts them.
func TestMigrateUploadsByAccount(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sealbox.db")
	s, err := openFile(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := s.now()
	for _, token := range []string{"sbx_up_1", "sbx_up_2"} {
		if err := s.update(func(tx Tx) error {
			return putUpload(tx, HashToken(token), &Upload{AccountID: "acct", AlbumID: "album", CreatedAt: now, ExpiresAt: now.Add(time.Hour)})
		}); err != nil {
			t.Fatal(err)
		}
	}
	// What a format 4 store holds: the sessions, no index of them by account.
	if err := s.update(func(tx Tx) error {
		if err := clearBucket(tx.Bucket(bucketUploadsByAccount)); err != nil {
			return err
		}
		return writeFormat(tx, 4)
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = openFile(path, Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.view(func(tx Tx) error { return checkOpenUploads(tx, "acct", s.now(), 2) }); fault.ErrorCode(err) != fault.ECodeLimitUploadSessions {
		t.Fatalf("after the migration, a third session of two allowed: %v", err)
	}
}
