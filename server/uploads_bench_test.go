package server_test

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"sealbox/kv"
	"sealbox/server/servertest"
)

// uploadBenchCase is one shape of concurrent uploads BenchmarkEngines
// measures: writers uploading distinct blobs of size bytes to accounts
// accounts (one upload session each), by PUT or by tus (a create and one
// PATCH that completes the transfer).
type uploadBenchCase struct {
	size             int
	writers, account int
	tus              bool
}

var uploadBenchCases = []uploadBenchCase{
	{size: 1 << 10, writers: 1, account: 1},
	{size: 1 << 10, writers: 32, account: 1},
	{size: 1 << 10, writers: 32, account: 8},
	{size: 64 << 10, writers: 1, account: 1},
	{size: 64 << 10, writers: 32, account: 1},
	{size: 64 << 10, writers: 32, account: 8},
	// An account may have 16 transfers open at once (--max-transfers).
	{size: 64 << 10, writers: 1, account: 1, tus: true},
	{size: 64 << 10, writers: 16, account: 1, tus: true},
	{size: 64 << 10, writers: 32, account: 8, tus: true},
}

func (c uploadBenchCase) String() string {
	kind := "UploadPUT"
	if c.tus {
		kind = "UploadTus"
	}
	return fmt.Sprintf("%s/%dKiB/writers=%d/accounts=%d", kind, c.size>>10, c.writers, c.account)
}

// benchUploads uploads b.N distinct blobs in the shape of c and reports
// ops/s (uploads completed per second) and, on an engine that counts them,
// retries/op (transactions rerun after a serialization conflict).
func benchUploads(b *testing.B, ts *TestServer, c uploadBenchCase) {
	type session struct{ access, upload string }
	sessions := make([]session, c.account)
	for i := range sessions {
		tok := ts.Register(b, fmt.Sprintf("bench%d@example.org", i))
		sessions[i] = session{tok.Access, ts.OpenUpload(b, tok.Access, ts.NewAlbum(b, tok.Access))}
	}
	var nonce [16]byte
	rand.Read(nonce[:])
	blob := func(i int) []byte {
		data := make([]byte, c.size)
		copy(data, nonce[:])
		binary.BigEndian.PutUint64(data[len(nonce):], uint64(i))
		return data
	}
	upload := func(i int) error {
		s, data := sessions[i%len(sessions)], blob(i)
		hash := servertest.HashOf(data)
		if !c.tus {
			return benchDo(ts.URL()+"/v1/uploads/"+s.upload+"/blobs/"+hash, "PUT", s.access, data,
				map[string]string{"Content-Type": "application/octet-stream"}, http.StatusCreated, nil)
		}
		var location string
		err := benchDo(ts.URL()+"/v1/uploads/"+s.upload+"/tus", "POST", s.access, nil,
			tusHeaders("Upload-Length", strconv.Itoa(len(data)), "Upload-Metadata", tusMetadata(hash)), http.StatusCreated,
			func(r *http.Response) { location = r.Header.Get("Location") })
		if err != nil {
			return err
		}
		return benchDo(ts.URL()+location, "PATCH", s.access, data,
			tusHeaders("Upload-Offset", "0", "Content-Type", "application/offset+octet-stream"), http.StatusNoContent, nil)
	}
	before, figures := ts.Store.EngineStats()
	b.ResetTimer()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range c.writers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				if err := upload(int(i)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	if figures {
		after, _ := ts.Store.EngineStats()
		b.ReportMetric(float64(after.TxRetries-before.TxRetries)/float64(b.N), "retries/op")
		reportConflicts(b, before, after)
	}
}

// reportConflicts logs the retries per op by the statement that lost
// (engine.Stats.Conflicts), most first.
func reportConflicts(b *testing.B, before, after kv.EngineStats) {
	type count struct {
		at string
		n  uint64
	}
	var counts []count
	for at, n := range after.Conflicts {
		if n -= before.Conflicts[at]; n > 0 {
			counts = append(counts, count{at, n})
		}
	}
	if len(counts) == 0 {
		return
	}
	slices.SortFunc(counts, func(x, y count) int { return cmp.Compare(y.n, x.n) })
	var line strings.Builder
	for _, c := range counts {
		fmt.Fprintf(&line, " %s %.3f", c.at, float64(c.n)/float64(b.N))
	}
	b.Logf("N=%d retries/op by statement:%s", b.N, line.String())
}

// benchDo sends one request with body and wants status, handing the
// response to seen (when not nil) before its body is drained.
func benchDo(url, method, access string, body []byte, header map[string]string, want int, seen func(*http.Response)) error {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+access)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := benchClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if seen != nil {
		seen(resp)
	}
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("%s: status %d, want %d: %s", method, resp.StatusCode, want, msg)
	}
	return nil
}
