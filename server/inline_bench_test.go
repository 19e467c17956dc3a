package server_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"sealbox/server"
	"sealbox/server/servertest"
)

// BenchmarkSmallBlobPut: blob PUTs of 4, 16 and 64 KiB by 16 concurrent
// writers, kept inline (--inline-max 64KiB) and as files (--inline-max 0):
// what choosing the threshold trades. Compare ops/s within one run.
func BenchmarkSmallBlobPut(b *testing.B) {
	for _, size := range []int{4 << 10, 16 << 10, 64 << 10} {
		for _, mode := range []struct {
			name      string
			inlineMax int64
		}{{"inline", 64 << 10}, {"file", 0}} {
			b.Run(fmt.Sprintf("%dKiB/%s", size>>10, mode.name), func(b *testing.B) {
				ts := MustOpenServer(b, func(c *server.Config) { c.InlineMax = mode.inlineMax })
				benchSmallPut(b, ts, size, 16)
			})
		}
	}
}

func benchSmallPut(b *testing.B, ts *TestServer, size, writers int) {
	tok := ts.Register(b, "bench@example.org")
	up := ts.OpenUpload(b, tok.Access, ts.NewAlbum(b, tok.Access))
	base := randomBytes(size)
	bodies := make([][]byte, b.N)
	for i := range bodies {
		bodies[i] = bytes.Clone(base)
		binary.BigEndian.PutUint64(bodies[i], uint64(i))
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	b.SetBytes(int64(size))
	b.ResetTimer()
	for range writers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				req, _ := http.NewRequest("PUT", ts.URL()+"/v1/uploads/"+up+"/blobs/"+servertest.HashOf(bodies[i]), bytes.NewReader(bodies[i]))
				req.Header.Set("Content-Type", "application/octet-stream")
				req.Header.Set("Authorization", "Bearer "+tok.Access)
				resp, err := benchClient.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					b.Errorf("status %d", resp.StatusCode)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}
