package kv

import (
	"path/filepath"
	"testing"
	"time"
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
