package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sealbox/kv/bolt"
	"sealbox/server"
	"sealbox/server/servertest"
)

// openBenchServer is MustOpenServer with the store's batch options: the
// benchmark compares the tuned group commit with bbolt's defaults.
func openBenchServer(b *testing.B, bo bolt.Options) *TestServer {
	b.Helper()
	return &TestServer{servertest.MustOpenServerWith(b, b.TempDir(), bo, func(c *server.Config) { c.AlbumProtocol = opPin })}
}

// BenchmarkOpCreate: creates of distinct assets in one album over HTTP, each
// with its own manifest and metadata blob (both kept inline: one store
// commit per op, no blob file), by 1 writer and by 64 concurrent writers, with the
// tuned group commit, with bbolt's batch defaults and with no fsync, and
// the same requests answered by a bare handler (bare-http). Compare ops/s
// with BenchmarkFsyncBaseline from the same run.
func BenchmarkOpCreate(b *testing.B) {
	for _, tuning := range []struct {
		name string
		opts bolt.Options
	}{
		{"tuned", bolt.Options{}},
		// bbolt's DefaultMaxBatchSize and DefaultMaxBatchDelay (internal to
		// bbolt since v1.4).
		{"bbolt-defaults", bolt.Options{MaxBatchSize: 1000, MaxBatchDelay: 10 * time.Millisecond}},
		// The same ops with no fsync at all: what the process can do on
		// this machine's cores when the disk costs nothing, the ceiling of
		// both ratios the op goals ask of the durable runs.
		{"no-fsync", bolt.Options{NoSync: true}},
	} {
		for _, writers := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/writers=%d", tuning.name, writers), func(b *testing.B) {
				benchOpCreate(b, openBenchServer(b, tuning.opts), writers)
			})
		}
	}
	// The same requests to a bare net/http handler that reads the body and
	// answers with an op's answer: what HTTP alone costs this process on
	// this machine's cores, the ceiling of any op over HTTP here.
	for _, writers := range []int{1, 64} {
		b.Run(fmt.Sprintf("bare-http/writers=%d", writers), func(b *testing.B) {
			benchBareOps(b, writers)
		})
	}
}

// benchBareOps sends BenchmarkOpCreate's requests, bodies and header
// included, to a bare handler.
func benchBareOps(b *testing.B, writers int) {
	f := newOpAccount(b, MustOpenServer(b), "bench@example.org")
	answer := []byte(`{"asset_id":"00000000-0000-4000-8000-000000000000","sync_seq":1000,"action":"create","replayed":false}`)
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(answer)
	}))
	defer bare.Close()
	request := createRequests(b, f, bare.URL)
	b.ResetTimer()
	sendInParallel(b, writers, http.StatusOK, request)
}

// createRequests makes the b.N requests of BenchmarkOpCreate, creates of
// distinct assets in f's album, to the server at baseURL: the bodies are
// encoded before the timer starts.
func createRequests(b *testing.B, f *opFixture, baseURL string) func(i int) *http.Request {
	bodies := make([][]byte, b.N)
	for i := range bodies {
		raw, err := json.Marshal(f.createBody(fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)))
		if err != nil {
			b.Fatal(err)
		}
		bodies[i] = raw
	}
	url := baseURL + "/v1/albums/" + f.album + "/ops"
	return func(i int) *http.Request {
		req, _ := http.NewRequest("POST", url, bytes.NewReader(bodies[i]))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+f.tok.Access)
		return req
	}
}

// benchOpCreate measures creates on ts, whose albums are pinned to opPin.
// On an engine with figures (PostgreSQL) it also reports what an op costs
// in exchanges with the database beyond its reads.
func benchOpCreate(b *testing.B, ts *TestServer, writers int) {
	f := newOpAccount(b, ts, "bench@example.org")
	request := createRequests(b, f, ts.URL())
	before, figures := ts.Store.EngineStats()
	b.ResetTimer()
	sendInParallel(b, writers, http.StatusOK, request)
	if figures {
		after, _ := ts.Store.EngineStats()
		reads := after.Reads - before.Reads
		b.ReportMetric(float64(reads)/float64(b.N), "reads/op")
		b.ReportMetric(float64(after.RoundTrips-before.RoundTrips-reads)/float64(b.N), "extra-trips/op")
		b.ReportMetric(float64(after.TxRetries-before.TxRetries)/float64(b.N), "retries/op")
	}
}

// BenchmarkFsyncBaseline is the floor of any durable write on this disk:
// append a 512-byte record to a file and fsync it, in a loop.
func BenchmarkFsyncBaseline(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "records"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	record := bytes.Repeat([]byte{'r'}, 512)
	b.ResetTimer()
	for range b.N {
		if _, err := f.Write(record); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// sendInParallel sends the requests request(0) to request(b.N-1) from
// writers goroutines, each answer wanted with status want, and reports the
// rate as ops/s; the timer stops when the last answer is in.
func sendInParallel(b *testing.B, writers, want int, request func(i int) *http.Request) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				resp, err := benchClient.Do(request(int(i)))
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != want {
					b.Errorf("status %d, want %d", resp.StatusCode, want)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}
