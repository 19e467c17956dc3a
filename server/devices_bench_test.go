package server_test

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/kvtest"
)

var ledgerSessions = flag.Int("ledger-sessions", 1_000_000, "sessions in the store BenchmarkListDevices reads from")

// BenchmarkListDevices measures GET /v1/auth/devices through the full HTTP
// stack (middleware, router, bearer lookup, ledger read, JSON) for an account
// with 50 sessions and 20 cohorts, in a store of -ledger-sessions sessions.
// The documented run is the default, a million:
//
//	go test -run '^$' -bench BenchmarkListDevices ./server/
//
// Building that store takes minutes, so it is built once, cached under
// os.TempDir() by its parameters, and copied for each run. For a quick look,
// add -args -ledger-sessions=10000.
func BenchmarkListDevices(b *testing.B) {
	const own, cohorts = 50, 20
	dir := b.TempDir()
	copyFile(b, cachedFillerStore(b, *ledgerSessions-own), filepath.Join(dir, "sealbox.db"))
	ts := MustOpenServerIn(b, dir)
	tok := ts.Register(b, "bench@example.com")
	for i := 1; i < own; i++ {
		ts.Clock.Advance(time.Second)
		extra := map[string]any{}
		if i <= cohorts {
			extra["cohort_hash"] = fmt.Sprintf("cohort-%02d", i)
		}
		ts.Login(b, "bench@example.com", extra)
	}
	sessions, seen := ts.Ledger(b, tok.Access)
	if len(sessions) != own || len(seen) != cohorts {
		b.Fatalf("ledger: got %d sessions and %d cohorts, want %d and %d", len(sessions), len(seen), own, cohorts)
	}

	h := ts.Handler()
	req := httptest.NewRequest(http.MethodGet, "/v1/auth/devices", nil)
	req.Header.Set("Authorization", "Bearer "+tok.Access)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
}

// cachedFillerStore returns the path of a store holding n sessions of other
// accounts (five per account, as many devices sign in), building it on first
// use. Accounts themselves are not written: the ledger never reads them.
func cachedFillerStore(b *testing.B, n int) string {
	b.Helper()
	path := filepath.Join(os.TempDir(), fmt.Sprintf("sealbox-bench-ledger-v2-%d.db", n))
	if _, err := os.Stat(path); err == nil {
		return path
	}
	start := time.Now()
	partial := fmt.Sprintf("%s.%d.partial", path, os.Getpid())
	defer os.Remove(partial)
	clock := kvtest.NewClock()
	store, err := kvtest.Open(partial, kv.Options{Now: clock.Now})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	rng := rand.New(rand.NewChaCha8([32]byte{'s', 'e', 'a', 'l', 'b', 'o', 'x'}))
	uuid := func() string {
		var u [16]byte
		for i := range u {
			u[i] = byte(rng.Uint32())
		}
		u[6], u[8] = u[6]&0x0f|0x40, u[8]&0x3f|0x80
		return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
	}
	tokens := func(*kv.Session) (string, string) {
		return fmt.Sprintf("bench-at-%x%x", rng.Uint64(), rng.Uint64()), fmt.Sprintf("bench-rt-%x%x", rng.Uint64(), rng.Uint64())
	}
	const batch = 50_000
	t0 := clock.Now()
	var account string
	for done := 0; done < n; {
		sessions := make([]*kv.Session, 0, batch)
		for ; done < n && len(sessions) < batch; done++ {
			if done%5 == 0 {
				account = uuid()
			}
			created := t0.Add(-time.Duration(rng.IntN(30*24*3600)) * time.Second)
			sessions = append(sessions, &kv.Session{
				ID: uuid(), AccountID: account,
				CreatedAt: created, AuthenticatedAt: created,
				AccessExpiresAt: created.Add(15 * time.Minute), RefreshExpiresAt: created.Add(60 * 24 * time.Hour),
				UserAgent: "Mozilla/5.0 (X11; Linux x86_64) sealbox-bench", IPAddress: "203.0.113.7",
			})
		}
		err := store.Bulk(func(bk *kv.Bulk) error {
			for _, sess := range sessions {
				access, refresh := tokens(sess)
				if err := bk.Session(sess, access, refresh); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := store.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(partial, path); err != nil {
		b.Fatal(err)
	}
	b.Logf("built %s (%d sessions) in %s", path, n, time.Since(start).Round(time.Second))
	return path
}

func copyFile(b *testing.B, src, dst string) {
	b.Helper()
	in, err := os.Open(src)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
}
