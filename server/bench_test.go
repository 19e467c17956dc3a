package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sealbox/blobs"
	"sealbox/kv"
	"sealbox/kv/kvtest"
	"sealbox/server"
	"sealbox/server/password"
	"sealbox/server/servertest"
)

// benchClient keeps enough idle connections for b.RunParallel.
var benchClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}}

func benchGET(b *testing.B, url, token string) {
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest("GET", url, nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := benchClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	})
}

// BenchmarkAuthenticatedGET: GET /v1/auth/profile through the full stack
// (middleware, router, token lookup, account read) over a real listener.
// Compare with BenchmarkBareHandler from the same run.
func BenchmarkAuthenticatedGET(b *testing.B) {
	ts := MustOpenServer(b)
	tok := ts.Register(b, "bench@example.org")
	b.ResetTimer()
	benchGET(b, ts.URL()+"/v1/auth/profile", tok.Access)
}

// BenchmarkBareHandler is the baseline: a bare net/http handler writing a
// JSON body of the same size over a real listener.
func BenchmarkBareHandler(b *testing.B) {
	body, _ := json.Marshal(map[string]string{
		"user_id": "6f1c2b9e-3d4a-4e5f-8a7b-1c2d3e4f5a6b", "email": "bench@example.org", "created_at": "2026-11-22T10:00:00Z",
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	b.ResetTimer()
	benchGET(b, "http://"+ln.Addr().String()+"/", "")
}

// BenchmarkLogin: one sign-in after another (POST /v1/auth/login with the
// right password, test argon2id cost) through the full stack: the lockout
// check, the attempt gate, the verification and the new session's write.
func BenchmarkLogin(b *testing.B) { benchLogin(b) }

// BenchmarkLoginProductionCost is BenchmarkLogin at the production
// argon2id cost, where the hash, not the store, sets the pace.
func BenchmarkLoginProductionCost(b *testing.B) {
	benchLogin(b, func(c *server.Config) { c.Argon2 = password.Default })
}

func benchLogin(b *testing.B, edit ...func(*server.Config)) {
	ts := MustOpenServer(b, edit...)
	ts.Register(b, "bench@example.org")
	body := map[string]any{"email": "bench@example.org", "password": servertest.Password}
	b.ResetTimer()
	for b.Loop() {
		if r := ts.Do(b, Req{Method: "POST", Path: "/v1/auth/login", Body: body}); r.Status != http.StatusOK {
			b.Fatalf("status %d", r.Status)
		}
	}
}

// BenchmarkLoginParallel: sign-ins from b.RunParallel's goroutines, each
// to an account of its own, so they contend for the store, not the gate.
func BenchmarkLoginParallel(b *testing.B) {
	ts := MustOpenServer(b)
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		email := fmt.Sprintf("bench%d@example.org", next.Add(1))
		ts.Register(b, email)
		body := map[string]any{"email": email, "password": servertest.Password}
		for pb.Next() {
			if r := ts.Do(b, Req{Method: "POST", Path: "/v1/auth/login", Body: body}); r.Status != http.StatusOK {
				b.Fatalf("status %d", r.Status)
			}
		}
	})
}

// BenchmarkConcurrentLoginsRSS runs 200 concurrent logins with the
// production argon2id cost (64 MiB each) and reports the process's peak
// RSS: the semaphore keeps it far below 200 x 64 MiB. Run it alone
// (-bench ConcurrentLoginsRSS) so the peak belongs to it.
func BenchmarkConcurrentLoginsRSS(b *testing.B) {
	ts := MustOpenServer(b, func(c *server.Config) { c.Argon2 = password.Default })
	ts.Register(b, "flood@example.org")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var wg sync.WaitGroup
		for j := 0; j < 200; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ts.Do(b, Req{Method: "POST", Path: "/v1/auth/login", Body: map[string]any{"email": "flood@example.org", "password": servertest.Password}})
			}()
		}
		wg.Wait()
	}
	b.ReportMetric(float64(peakRSS(b))/(1<<20), "peak-RSS-MiB")
}

// peakRSS reads VmHWM (peak resident set) of this process.
func peakRSS(tb testing.TB) int64 { return procStatus(tb, "VmHWM") }

// procStatus reads a "kB" field (VmRSS, VmHWM) of this process.
func procStatus(tb testing.TB, field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		tb.Skip("no /proc/self/status")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	tb.Skipf("no %s", field)
	return 0
}

// largeStore returns the path of a store with the given numbers of accounts
// and sessions, generated once and cached in the temp dir (generating a
// million sessions takes a minute or two).
func largeStore(b *testing.B, accounts, sessions int) (path string, sampleAccount string) {
	b.Helper()
	// The name carries the record format's version, so a fixture cached by
	// an older build is never read as if it were current.
	path = filepath.Join(os.TempDir(), fmt.Sprintf("sealbox-bench-v4-%d-%d.db", accounts, sessions))
	sampleAccount = benchAccountID(accounts / 2)
	if _, err := os.Stat(path); err == nil {
		return path, sampleAccount
	}
	tmp := path + ".tmp"
	os.Remove(tmp)
	store, err := kvtest.Open(tmp, kv.Options{})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	const perTx = 20000
	for start := 0; start < sessions; start += perTx {
		err := store.Bulk(func(bk *kv.Bulk) error {
			for i := start; i < start+perTx && i < sessions; i++ {
				acct := i % accounts
				if i < accounts {
					if err := bk.Account(&kv.Account{ID: benchAccountID(acct), Email: fmt.Sprintf("user%d@example.org", acct), PasswordHash: "x", CreatedAt: now}); err != nil {
						return err
					}
				}
				sess := &kv.Session{
					ID: fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i), AccountID: benchAccountID(acct),
					CreatedAt: now.Add(time.Duration(i)), AuthenticatedAt: now,
					AccessExpiresAt: now.Add(time.Hour), RefreshExpiresAt: now.Add(30 * 24 * time.Hour),
					UserAgent: "bench", IPAddress: "127.0.0.1",
				}
				if err := bk.Session(sess, fmt.Sprintf("at-%d", i), fmt.Sprintf("rt-%d", i)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	store.Close()
	if err := os.Rename(tmp, path); err != nil {
		b.Fatal(err)
	}
	return path, sampleAccount
}

func benchAccountID(n int) string { return fmt.Sprintf("%08x-1111-4000-8000-000000000000", n) }

// BenchmarkStartupLargeStore: from opening a store of 100,000 accounts and
// 1,000,000 sessions to a listening server (goal: under 1 s).
func BenchmarkStartupLargeStore(b *testing.B) {
	path, _ := largeStore(b, 100_000, 1_000_000)
	blobStore, err := blobs.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		store, err := kvtest.Open(path, kv.Options{})
		if err != nil {
			b.Fatal(err)
		}
		cfg := server.DefaultConfig()
		cfg.SealKey = make([]byte, 32)
		srv := server.New(cfg, store, blobStore)
		if err := srv.Open("127.0.0.1:0"); err != nil {
			b.Fatal(err)
		}
		resp, err := http.Get(srv.URL() + "/v1/version")
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("not serving: %v", err)
		}
		resp.Body.Close()
		srv.Close(context.Background())
		store.Close()
	}
}

// BenchmarkListSessionsLargeStore: one account's sessions (10 of them) in a
// store of 1,000,000 sessions (goal: under 1 ms).
func BenchmarkListSessionsLargeStore(b *testing.B) {
	path, acct := largeStore(b, 100_000, 1_000_000)
	store, err := kvtest.Open(path, kv.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l, err := store.Ledger(acct)
		if err != nil || len(l.Sessions) != 10 {
			b.Fatalf("got %d sessions, %v", len(l.Sessions), err)
		}
	}
}
