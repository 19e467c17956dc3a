package kv_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/fault"
	"sealbox/kv/kvtest"
)

// maxAge is the absolute session lifetime the tests refresh under.
const maxAge = 365 * 24 * time.Hour

func newSession(c *kvtest.Clock, accountID, id string) *kv.Session {
	now := c.Now()
	return &kv.Session{
		ID: id, AccountID: accountID, CreatedAt: now, AuthenticatedAt: now,
		AccessExpiresAt: now.Add(15 * time.Minute), RefreshExpiresAt: now.Add(24 * time.Hour),
	}
}

func mustAccount(tb testing.TB, s *kv.Store, c *kvtest.Clock, n int) *kv.Account {
	tb.Helper()
	a := &kv.Account{ID: fmt.Sprintf("acct-%d", n), Email: fmt.Sprintf("u%d@example.org", n), PasswordHash: "h", CreatedAt: c.Now()}
	if err := s.CreateAccount(a, newSession(c, a.ID, fmt.Sprintf("sess-%d-0", n)), fmt.Sprintf("at-%d", n), fmt.Sprintf("rt-%d", n)); err != nil {
		tb.Fatal(err)
	}
	return a
}

func TestCreateAccountDuplicateEmail(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	mustAccount(t, s, c, 1)
	dup := &kv.Account{ID: "other", Email: "u1@example.org", CreatedAt: c.Now()}
	err := s.CreateAccount(dup, newSession(c, "other", "s2"), "a2", "r2")
	if got := fault.ErrorCode(err); got != fault.ECodeAccountExists {
		t.Fatalf("got %q, want %s", got, fault.ECodeAccountExists)
	}
	if _, err := s.Account("other"); fault.ErrorCode(err) != fault.ECodeAccountNotFound {
		t.Fatalf("a refused registration wrote the account: %v", err)
	}
}

func TestTokensAreStoredOnlyAsHashes(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	a := &kv.Account{ID: "a", Email: "a@example.org", CreatedAt: c.Now()}
	access, refresh := "sbx_at_SECRETACCESS0123456789", "sbx_rt_SECRETREFRESH0123456789"
	if err := s.CreateAccount(a, newSession(c, "a", "s"), access, refresh); err != nil {
		t.Fatal(err)
	}
	path := s.Path()
	s.Close()
	assertFileLacks(t, path, access, refresh)
}

func TestAuthenticateExpiry(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	mustAccount(t, s, c, 1)
	if _, err := s.Authenticate("at-1"); err != nil {
		t.Fatalf("live token refused: %v", err)
	}
	c.Advance(15 * time.Minute)
	if _, err := s.Authenticate("at-1"); fault.ErrorCode(err) != fault.ECodeUnauthenticated {
		t.Fatalf("expired access token: got %v, want %s", err, fault.ECodeUnauthenticated)
	}
}

func TestRefreshRotatesAndDetectsReuse(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	a := mustAccount(t, s, c, 1)
	c.Advance(time.Minute)
	next := newSession(c, "", "sess-2")
	if err := s.Refresh("rt-1", next, "at-2", "rt-2", maxAge); err != nil {
		t.Fatal(err)
	}
	if next.AccountID != a.ID || next.LineageID != "sess-1-0" {
		t.Fatalf("carried fields: got account %q lineage %q", next.AccountID, next.LineageID)
	}
	if _, err := s.Authenticate("at-1"); err == nil {
		t.Fatal("the rotated-out access token still works")
	}
	c.Advance(time.Minute)
	third := newSession(c, "", "sess-3")
	if err := s.Refresh("rt-2", third, "at-3", "rt-3", maxAge); err != nil {
		t.Fatal(err)
	}
	// rt-1 is spent: presenting it again is refused and kills the lineage.
	err := s.Refresh("rt-1", newSession(c, "", "sess-x"), "at-x", "rt-x", maxAge)
	if fault.ErrorCode(err) != fault.ECodeSessionExpired {
		t.Fatalf("reuse: got %v, want %s", err, fault.ECodeSessionExpired)
	}
	if _, err := s.Authenticate("at-3"); err == nil {
		t.Fatal("reuse of a spent refresh token left the lineage's live session open")
	}
	if _, err := s.Authenticate("at-x"); err == nil {
		t.Fatal("a refused refresh minted a session")
	}
}

func TestSweepRemovesExpiredSessionsOnly(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	mustAccount(t, s, c, 1)
	c.Advance(12 * time.Hour)
	mustAccount(t, s, c, 2)
	c.Advance(12 * time.Hour)
	// DueExpiries counts what Sweep then processes: had counting deleted
	// anything, the sweep would find less.
	due, err := s.DueExpiries()
	if err != nil || due == 0 {
		t.Fatalf("due before the sweep: %d, %v", due, err)
	}
	swept, err := s.Sweep()
	if err != nil {
		t.Fatal(err)
	}
	if swept != due {
		t.Fatalf("swept %d entries, DueExpiries counted %d", swept, due)
	}
	if due, err := s.DueExpiries(); err != nil || due != 0 {
		t.Fatalf("due after the sweep: %d, %v", due, err)
	}
	if got := sessionsOf(t, s, "acct-1"); len(got) != 0 {
		t.Fatalf("expired session survived the sweep: %d", len(got))
	}
	if got := sessionsOf(t, s, "acct-2"); len(got) != 1 {
		t.Fatalf("live session swept: %d left", len(got))
	}
}

func TestSessionsOldestFirstPrefixScan(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	a := mustAccount(t, s, c, 1)
	mustAccount(t, s, c, 10) // shares the "acct-1" prefix as a string
	for i := 1; i <= 3; i++ {
		c.Advance(time.Second)
		if err := s.LoginSucceeded(a.Email, newSession(c, a.ID, fmt.Sprintf("sess-1-%d", i)), fmt.Sprintf("a%d", i), fmt.Sprintf("r%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	got := sessionsOf(t, s, a.ID)
	var ids []string
	for _, g := range got {
		ids = append(ids, g.ID)
	}
	if want := "[sess-1-0 sess-1-1 sess-1-2 sess-1-3]"; fmt.Sprint(ids) != want {
		t.Fatalf("got %v, want %s", ids, want)
	}
}

func TestLockoutWindowAndReset(t *testing.T) {
	s, c := kvtest.MustOpenStore(t)
	a := mustAccount(t, s, c, 1)
	p := kv.LockoutPolicy{Failures: 3, Window: 15 * time.Minute}
	failures := func() int {
		t.Helper()
		_, n, err := s.PasswordAttempt(a.Email, p)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	fail := func() {
		t.Helper()
		if err := s.CountPasswordFailure(a.Email, p); err != nil {
			t.Fatal(err)
		}
	}
	fail()
	fail()
	if got := failures(); got != 2 {
		t.Fatalf("failures: got %d, want 2", got)
	}
	// A success clears the count.
	if err := s.Reauthenticated(a.Email, "sess-1-0", c.Now()); err != nil {
		t.Fatal(err)
	}
	if got := failures(); got != 0 {
		t.Fatalf("after a success: got %d, want 0", got)
	}
	fail()
	fail()
	fail()
	acct, _, err := s.PasswordAttempt(a.Email, p)
	if fault.ErrorCode(err) != fault.ECodeAccountLocked || acct != nil {
		t.Fatalf("got %v, want %s", err, fault.ECodeAccountLocked)
	}
	if ke := err.(*fault.Error); ke.RetryAfter != 15*time.Minute {
		t.Fatalf("RetryAfter: got %v, want 15m", ke.RetryAfter)
	}
	if err := s.CountPasswordFailure(a.Email, p); fault.ErrorCode(err) != fault.ECodeAccountLocked {
		t.Fatalf("a locked address counted another failure: %v", err)
	}
	c.Advance(15 * time.Minute)
	if got := failures(); got != 0 {
		t.Fatalf("the lock outlived its window: %d failures", got)
	}
	// Failures are remembered for the window, across sweeps.
	fail()
	c.Advance(time.Minute)
	if _, err := s.Sweep(); err != nil {
		t.Fatal(err)
	}
	if got := failures(); got != 1 {
		t.Fatalf("count lost across a sweep: %d", got)
	}
	c.Advance(15 * time.Minute)
	if got := failures(); got != 0 {
		t.Fatalf("a failure outlived the window: %d", got)
	}
}

func TestLockoutCountsUnknownAddresses(t *testing.T) {
	s, _ := kvtest.MustOpenStore(t)
	p := kv.LockoutPolicy{Failures: 2, Window: time.Minute}
	for i := 0; i < 2; i++ {
		if err := s.CountPasswordFailure("ghost@example.org", p); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.PasswordAttempt("ghost@example.org", p); fault.ErrorCode(err) != fault.ECodeAccountLocked {
		t.Fatalf("got %v", err)
	}
}

// TestOpenReadOnly: a read-only open creates nothing and writes nothing; a
// file of this format that lacks a bucket is refused rather than read as if
// the bucket were there, and an older one is read through a migrated copy.
func TestOpenReadOnly(t *testing.T) {
	cases := []struct {
		name string
		// make writes the file at path, or nothing.
		make    func(t *testing.T, path string)
		wantErr string
	}{
		{"missing file", func(*testing.T, string) {}, "no such file"},
		{"older store without a bucket, read through a migrated copy", func(t *testing.T, path string) {
			writeBoltFile(t, path, map[string]map[string]string{"accounts": {}})
		}, ""},
		{"store of this format without a bucket", func(t *testing.T, path string) {
			writeBoltFile(t, path, map[string]map[string]string{
				"accounts": {}, "meta": {"format": strconv.Itoa(kv.FormatVersion)},
			})
		}, "has no accounts_by_email bucket"},
		{"complete store", func(t *testing.T, path string) {
			s, err := kvtest.Open(path, kv.Options{})
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
		}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sealbox.db")
			tc.make(t, path)
			before, _ := os.ReadFile(path)
			s, err := kvtest.Open(path, kv.Options{ReadOnly: true})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if _, err := s.UserSummaries(); err != nil {
					t.Fatal(err)
				}
				s.Close()
			} else if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want an error saying %q", err, tc.wantErr)
			}
			after, statErr := os.ReadFile(path)
			if before == nil && !errors.Is(statErr, fs.ErrNotExist) {
				t.Fatal("a read-only open created the file")
			}
			if !bytes.Equal(before, after) {
				t.Fatal("a read-only open changed the file")
			}
		})
	}
}
