package server_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"sealbox/blobs/s3test"
	"sealbox/kv"
	"sealbox/kv/kvtest"
	"sealbox/kv/pgtest"
	"sealbox/server"
)

// benchEngine is a pair of engines the benchmarks run on.
type benchEngine struct {
	name string
	open func(tb testing.TB, edit ...func(*server.Config)) *TestServer
}

// benchEngines are bbolt with local files, always, and PostgreSQL with S3
// when the run has both (SEALBOX_TEST_PG and SEALBOX_TEST_S3), so that one
// run measures the two side by side on the same machine.
func benchEngines() []benchEngine {
	engines := []benchEngine{{"bbolt+files", openLocalServer}}
	if pgtest.Enabled() && s3test.Enabled() {
		engines = append(engines, benchEngine{"postgres+s3", MustOpenServer})
	}
	return engines
}

// openLocalServer opens a test server on bbolt and local files whatever
// engines the suite runs on: its directory is prepared with both, which a
// test server keeps.
func openLocalServer(tb testing.TB, edit ...func(*server.Config)) *TestServer {
	tb.Helper()
	dir := tb.TempDir()
	s, err := kvtest.Open(filepath.Join(dir, "sealbox.db"), kv.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	s.Close()
	if err := os.Mkdir(filepath.Join(dir, "blobs"), 0o700); err != nil {
		tb.Fatal(err)
	}
	return MustOpenServerIn(tb, dir, edit...)
}

// BenchmarkEngines runs the hot paths on each pair of engines in one run:
// an authenticated GET, a share read of a whole 1 MiB blob and of a 64 KiB
// range of a 64 MiB one, lifecycle op creates by 1 and by 64 writers, and
// concurrent uploads (uploadBenchCases: 1 KiB blobs kept inline and 64 KiB
// files, by 1 and 32 writers, to one account or spread over 8, by PUT and
// by tus). On PostgreSQL the authenticated GET reports reads/op and
// trips/op (every exchange with the database), the op benchmarks reads/op,
// extra-trips/op (the round trips an op costs beyond its reads) and
// retries/op, and the upload benchmarks retries/op.
func BenchmarkEngines(b *testing.B) {
	for _, e := range benchEngines() {
		b.Run(e.name+"/AuthenticatedGET", func(b *testing.B) {
			ts := e.open(b)
			tok := ts.Register(b, "bench@example.org")
			before, figures := ts.Store.EngineStats()
			b.ResetTimer()
			benchGET(b, ts.URL()+"/v1/auth/profile", tok.Access)
			if figures {
				// A view's COMMIT is sent after it has returned: the last
				// request's may still be on its way, and is not counted.
				after, _ := ts.Store.EngineStats()
				b.ReportMetric(float64(after.Reads-before.Reads)/float64(b.N), "reads/op")
				b.ReportMetric(float64(after.RoundTrips-before.RoundTrips)/float64(b.N), "trips/op")
			}
		})
		b.Run(e.name+"/ShareBlob1MiB", func(b *testing.B) {
			url, _ := linkedBlobOn(b, e.open(b, unlimitedShareReads), 1<<20)
			benchFetch(b, url, "", http.StatusOK, 1<<20)
		})
		b.Run(e.name+"/ShareBlobRange64KiB", func(b *testing.B) {
			url, _ := linkedBlobOn(b, e.open(b, unlimitedShareReads), 64<<20)
			benchFetch(b, url, range64KiB, http.StatusPartialContent, 64<<10)
		})
		for _, writers := range []int{1, 64} {
			b.Run(fmt.Sprintf("%s/OpCreate/writers=%d", e.name, writers), func(b *testing.B) {
				benchOpCreate(b, e.open(b, func(c *server.Config) { c.AlbumProtocol = opPin }), writers)
			})
		}
		for _, c := range uploadBenchCases {
			b.Run(e.name+"/"+c.String(), func(b *testing.B) { benchUploads(b, e.open(b), c) })
		}
	}
}
