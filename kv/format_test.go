package kv_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/kvtest"
)

// format0Fixture is a store written by sealbox before store formats were
// recorded (testdata/format0, made by that code: alice with three sessions,
// two of them seen under cohort "cohortA", bob with one under "cohortB", an
// album, one blob and a share link). fixtureNow is just after it was written.
const format0Fixture = "testdata/format0/sealbox.db"

var fixtureNow = time.Date(2026, 11, 24, 4, 5, 0, 0, time.UTC)

// copyFixture copies the fixture's database into a temp dir.
func copyFixture(tb *testing.T) string {
	tb.Helper()
	raw, err := os.ReadFile(format0Fixture)
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), "sealbox.db")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

func TestOpenMigratesFormat0(t *testing.T) {
	path := copyFixture(t)
	var from = -1
	var ran []kv.Migration
	s, err := kvtest.Open(path, kv.Options{Now: func() time.Time { return fixtureNow }, Version: "1.2.3",
		BeforeMigrate: func(f int, pending []kv.Migration) { from, ran = f, pending }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if from != 0 || len(ran) != kv.FormatVersion || ran[0].To != 1 {
		t.Fatalf("told of migrations from %d: %v", from, ran)
	}
	if v, by, err := s.Format(); err != nil || v != kv.FormatVersion || by != "1.2.3" {
		t.Fatalf("format after migrating: %d by %q (%v)", v, by, err)
	}
	alice, err := s.AccountByEmail("alice@example.org")
	if err != nil || alice == nil {
		t.Fatalf("alice: %v", err)
	}
	l, err := s.Ledger(alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Sessions) != 3 || len(l.Cohorts) != 1 || l.Cohorts[0].Hash != "cohortA" {
		t.Fatalf("alice's ledger after migrating: %d sessions, cohorts %v", len(l.Sessions), l.Cohorts)
	}
	bob, err := s.AccountByEmail("bob@example.org")
	if err != nil || bob == nil {
		t.Fatalf("bob: %v", err)
	}
	if l, err = s.Ledger(bob.ID); err != nil || len(l.Sessions) != 2 || len(l.Cohorts) != 1 || l.Cohorts[0].Hash != "cohortB" {
		t.Fatalf("bob's ledger after migrating: %+v (%v)", l, err)
	}
	const blob = "8b33191ba1fcfaa4dcdf1bf63b373237e5843128c022d55cefc873ab00be9ac6"
	if held, err := s.Holds(alice.ID, blob); err != nil || !held {
		t.Fatalf("alice no longer holds her blob: %v", err)
	}
	// Migration 3: the totals are the sharded rows, equal to the records.
	if count, size, err := s.BlobTotals(); err != nil || count != 1 || size != int64(len("sealed bytes of a photo")) {
		t.Fatalf("blob totals after migrating: %d blobs, %d bytes (%v)", count, size, err)
	}
	// Migration 7: invitations have their buckets, empty.
	if invites, err := s.Invites(); err != nil || len(invites) != 0 {
		t.Fatalf("invitations after migrating: %v %v", invites, err)
	}
	if err := s.CreateInvite(kv.Invite{ID: "inv-1", ExpiresAt: fixtureNow.Add(time.Hour)}, "sbx_in_code"); err != nil {
		t.Fatalf("an invitation on the migrated store: %v", err)
	}
	// Revoking alice's sessions through the migrated index removes hers only.
	if n, err := s.DeleteAccountSessions(alice.ID); err != nil || n != 3 {
		t.Fatalf("revoked %d of alice's sessions (%v), want 3", n, err)
	}
	if got := sessionsOf(t, s, bob.ID); len(got) != 2 {
		t.Fatalf("bob has %d sessions after alice's were revoked", len(got))
	}
	// Migration 7 indexed alice's holding under her blob: deleting her
	// leaves it held by nobody, so no longer recorded.
	d, err := s.DeleteAccount(alice.Email)
	if err != nil || d.UnheldBlobs != 1 {
		t.Fatalf("deleting alice: %+v %v", d, err)
	}
	if recorded, err := s.BlobsRecorded([]string{blob}); err != nil || recorded[blob] {
		t.Fatalf("alice's blob after her deletion: recorded %v (%v)", recorded, err)
	}
}

// TestOpenRefusesWithoutWriting: a store that needs a migration, opened with
// NoMigrate, and a store of a newer format, opened any way, are
// refused with both versions named, and not a byte of the file changes.
func TestOpenRefusesWithoutWriting(t *testing.T) {
	newer := func(t *testing.T) string {
		path := filepath.Join(t.TempDir(), "sealbox.db")
		s, err := kvtest.Open(path, kv.Options{Version: "0.9.0"})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		writeBoltFile(t, path, map[string]map[string]string{
			"meta": {"format": strconv.Itoa(kv.FormatVersion + 1), "opened_by": "9.9.9"},
		})
		return path
	}
	tooNew := []string{"format " + strconv.Itoa(kv.FormatVersion+1), "9.9.9", "up to " + strconv.Itoa(kv.FormatVersion)}
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) string
		opts  kv.Options
		want  error
		words []string
	}{
		{"older, --no-migrate", copyFixture, kv.Options{NoMigrate: true}, kv.ErrNeedsMigration, []string{"format 0", "writes format " + strconv.Itoa(kv.FormatVersion), "--no-migrate", "sealbox backup DEST"}},
		{"newer", newer, kv.Options{}, kv.ErrFormatTooNew, tooNew},
		{"newer, read-only", newer, kv.Options{ReadOnly: true}, kv.ErrFormatTooNew, tooNew},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.store(t)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			migrated := false
			tc.opts.BeforeMigrate = func(int, []kv.Migration) { migrated = true }
			s, err := kvtest.Open(path, tc.opts)
			if err == nil {
				s.Close()
				t.Fatal("opened")
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			for _, w := range tc.words {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("the refusal %q does not say %q", err, w)
				}
			}
			if migrated {
				t.Fatal("a refused store was migrated")
			}
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(before, after) {
				t.Fatal("a refused open changed the file")
			}
		})
	}
}

// TestOpenFreshStore: a new store starts at the current format; no migration
// runs on it.
func TestOpenFreshStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sealbox.db")
	s, err := kvtest.Open(path, kv.Options{Version: "1.0.0", BeforeMigrate: func(int, []kv.Migration) { t.Error("a fresh store was migrated") }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, by, err := s.Format(); err != nil || v != kv.FormatVersion || by != "1.0.0" {
		t.Fatalf("fresh store: format %d by %q (%v)", v, by, err)
	}
}

// TestOpenStoreCutBeforeItsFormat: a new store's buckets and its format
// record are written by two transactions; a store cut off between them (every
// bucket, no format record) opens and is brought to the current format
// instead of being refused as unreadable.
func TestOpenStoreCutBeforeItsFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sealbox.db")
	writeBoltFile(t, path, map[string]map[string]string{"meta": {}, "accounts": {}})
	s, err := kvtest.Open(path, kv.Options{Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, _, err := s.Format(); err != nil || v != kv.FormatVersion {
		t.Fatalf("format %d (%v), want %d", v, err, kv.FormatVersion)
	}
}

// TestReadOnlyReadsAnOlderFormat: a read-only open of a store of an older
// format reads it through a migrated copy (alice and her sessions are
// there), writes not a byte of it, snapshots it in its own format (so a
// backup of it also restores under the older binary), and leaves no copy
// behind once closed.
func TestReadOnlyReadsAnOlderFormat(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	path := copyFixture(t)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := kvtest.Open(path, kv.Options{ReadOnly: true, NoMigrate: true, Now: func() time.Time { return fixtureNow }})
	if err != nil {
		t.Fatalf("read-only open of a format-0 store: %v", err)
	}
	alice, err := s.AccountByEmail("alice@example.org")
	if err != nil || alice == nil {
		t.Fatalf("alice through the copy: %v", err)
	}
	if l, err := s.Ledger(alice.ID); err != nil || len(l.Sessions) != 3 {
		t.Fatalf("alice's ledger through the copy: %+v (%v)", l, err)
	}
	var snap bytes.Buffer
	if _, err := s.WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("a read-only open changed the older store")
	}
	if left, _ := os.ReadDir(os.Getenv("TMPDIR")); len(left) != 0 {
		t.Fatalf("the migrated copy was left behind: %v", left)
	}
	snapPath := filepath.Join(t.TempDir(), "sealbox.db")
	if err := os.WriteFile(snapPath, snap.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = kvtest.Open(snapPath, kv.Options{NoMigrate: true})
	if !errors.Is(err, kv.ErrNeedsMigration) || !strings.Contains(err.Error(), "format 0") {
		t.Fatalf("the snapshot of a format-0 store is not of format 0: %v", err)
	}
}
