package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sealbox/blobs"
	"sealbox/server"
)

// uploadMiB sizes BenchmarkUploadLargeBlob; the goal figure is for 2 GiB:
// go test ./server -run '^$' -bench UploadLargeBlob -benchtime 1x -upload-mib 2048
var uploadMiB = flag.Int64("upload-mib", 256, "size in MiB of the blob BenchmarkUploadLargeBlob uploads")

// randomBytes returns n reproducible pseudo-random bytes.
func randomBytes(n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{1})
	r.Read(b)
	return b
}

// linkedBlob stores a blob of size bytes through the API and registers a
// link serving it. It returns the blob's URL under /s/ and its file path
// ("" when the suite runs on S3).
func linkedBlob(b *testing.B, size int) (blobURL, file string) {
	return linkedBlobOn(b, MustOpenServer(b, unlimitedShareReads), size)
}

// unlimitedShareReads keeps the share-read limiter on the path but never
// refusing.
func unlimitedShareReads(c *server.Config) { c.ShareRate, c.ShareBurst = 1e9, 1<<30 }

// linkedBlobOn is linkedBlob on the server ts.
func linkedBlobOn(b *testing.B, ts *TestServer, size int) (blobURL, file string) {
	tok := ts.Register(b, "bench@example.org")
	data := randomBytes(size)
	hash := ts.Upload(b, tok.Access, data)
	id := strings.Repeat("5", 32)
	ts.Do(b, Req{Method: "POST", Path: "/v1/shares", Token: tok.Access,
		Body: map[string]any{"opaque_id": id, "metadata_hash": hash, "serves": []string{hash}}}).WantStatus(b, http.StatusCreated)
	if local, ok := ts.Blobs.(*blobs.Dir); ok {
		file = filepath.Join(local.Path(), hash[0:2], hash[2:4], hash)
	}
	return ts.URL() + "/s/" + id + "/blob/" + hash, file
}

// rawFileServer serves file with nothing but http.ServeContent over a real
// listener: the baseline the share read is compared with.
func rawFileServer(b *testing.B, file string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := os.Open(file)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		defer f.Close()
		fi, _ := f.Stat()
		http.ServeContent(w, r, "", fi.ModTime(), f)
	})}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/"
}

// benchFetch GETs url in parallel and checks each answer's status and size.
func benchFetch(b *testing.B, url, rangeHeader string, wantStatus int, wantBytes int64) {
	b.SetBytes(wantBytes)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest("GET", url, nil)
			if rangeHeader != "" {
				req.Header.Set("Range", rangeHeader)
			}
			resp, err := benchClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != wantStatus || n != wantBytes {
				b.Fatalf("got %d with %d bytes, want %d with %d", resp.StatusCode, n, wantStatus, wantBytes)
			}
		}
	})
}

// BenchmarkShareBlob1MiB: GET /s/{id}/blob/{hash} of a 1 MiB blob through
// the full stack (middleware, router, rate limiter, store lookups, open,
// blobhttp.Serve with sendfile). Compare with BenchmarkRawServeFile1MiB.
func BenchmarkShareBlob1MiB(b *testing.B) {
	url, _ := linkedBlob(b, 1<<20)
	benchFetch(b, url, "", http.StatusOK, 1<<20)
}

// BenchmarkRawServeFile1MiB: the same file through a bare ServeContent
// handler.
func BenchmarkRawServeFile1MiB(b *testing.B) {
	_, file := linkedBlob(b, 1<<20)
	skipWithoutFile(b, file)
	benchFetch(b, rawFileServer(b, file), "", http.StatusOK, 1<<20)
}

// skipWithoutFile skips a benchmark of a bare file server when the blob is
// not a local file (the suite runs on S3).
func skipWithoutFile(b *testing.B, file string) {
	if file == "" {
		b.Skip("serves the local blob file; the suite runs on S3")
	}
}

const range64KiB = "bytes=33554432-33619967" // 64 KiB from the middle of 64 MiB

// BenchmarkShareBlobRange64KiB: a 64 KiB range of a 64 MiB blob through the
// full stack. Compare with BenchmarkRawServeFileRange64KiB.
func BenchmarkShareBlobRange64KiB(b *testing.B) {
	url, _ := linkedBlob(b, 64<<20)
	benchFetch(b, url, range64KiB, http.StatusPartialContent, 64<<10)
}

// BenchmarkRawServeFileRange64KiB: the same range through a bare
// ServeContent handler.
func BenchmarkRawServeFileRange64KiB(b *testing.B) {
	_, file := linkedBlob(b, 64<<20)
	skipWithoutFile(b, file)
	benchFetch(b, rawFileServer(b, file), range64KiB, http.StatusPartialContent, 64<<10)
}

// generated yields size bytes by repeating a random block, so a blob of any
// size is streamed without being held in memory.
type generated struct {
	block []byte
	off   int64
	size  int64
}

func (g *generated) Read(p []byte) (int, error) {
	if g.off >= g.size {
		return 0, io.EOF
	}
	i := g.off % int64(len(g.block))
	n := copy(p, g.block[i:])
	n = int(min(int64(n), g.size-g.off))
	g.off += int64(n)
	return n, nil
}

// putStream sends size generated bytes with a Content-Length and returns
// the status and the time the request took.
func putStream(b *testing.B, url, token string, block []byte, size int64) (int, time.Duration) {
	req, _ := http.NewRequest("PUT", url, &generated{block: block, size: size})
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, time.Since(start)
}

// resetPeakRSS makes VmHWM start again from the current RSS (Linux
// clear_refs value 5) and returns that RSS.
func resetPeakRSS(b *testing.B) int64 {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Skipf("cannot reset the peak RSS: %v", err)
	}
	return procStatus(b, "VmRSS")
}

// BenchmarkUploadLargeBlob uploads one -upload-mib blob through PUT
// /v1/uploads/{id}/blobs/{hash} and, in the same run, through a bare handler
// doing io.Copy to a file and fsync. It reports both throughputs, their
// ratio (goal >= 0.7) and how far the sealbox upload raised the process's
// peak RSS (goal < 32 MiB; client and server share the process, so this
// bounds both). Run with -benchtime 1x.
func BenchmarkUploadLargeBlob(b *testing.B) {
	size := *uploadMiB << 20
	ts := MustOpenServer(b, func(c *server.Config) { c.AccessTTL = 24 * time.Hour })
	tok := ts.Register(b, "bench@example.org")
	album := ts.NewAlbum(b, tok.Access)
	block := randomBytes(1 << 20)
	h := sha256.New()
	io.Copy(h, &generated{block: block, size: size})
	hash := hex.EncodeToString(h.Sum(nil))

	dir := b.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	bare := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := os.CreateTemp(dir, "raw-*")
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		defer os.Remove(f.Name())
		defer f.Close()
		if _, err := io.Copy(f, r.Body); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		if err := f.Sync(); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})}
	go bare.Serve(ln)
	defer bare.Close()

	var sealboxTime, bareTime time.Duration
	var peakDelta int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		status, d := putStream(b, "http://"+ln.Addr().String()+"/", "", block, size)
		if status != http.StatusCreated {
			b.Fatalf("baseline status %d", status)
		}
		bareTime += d

		up := ts.OpenUpload(b, tok.Access, album)
		base := resetPeakRSS(b)
		status, d = putStream(b, ts.URL()+"/v1/uploads/"+up+"/blobs/"+hash, tok.Access, block, size)
		peakDelta = max(peakDelta, procStatus(b, "VmHWM")-base)
		if status != http.StatusCreated && status != http.StatusOK {
			b.Fatalf("upload status %d", status)
		}
		sealboxTime += d
		b.StopTimer()
		if err := ts.Blobs.Remove(hash); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	mbps := func(d time.Duration) float64 { return float64(size) * float64(b.N) / d.Seconds() / 1e6 }
	b.ReportMetric(mbps(sealboxTime), "sealbox-MB/s")
	b.ReportMetric(mbps(bareTime), "iocopy-fsync-MB/s")
	b.ReportMetric(bareTime.Seconds()/sealboxTime.Seconds(), "ratio")
	b.ReportMetric(float64(peakDelta)/(1<<20), "peak-RSS-delta-MiB")
	b.Log(fmt.Sprintf("%d MiB: sealbox %v, io.Copy+fsync %v", *uploadMiB, sealboxTime/time.Duration(b.N), bareTime/time.Duration(b.N)))
}
