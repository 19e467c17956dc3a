package server_test

import (
	"os"
	"testing"

	"sealbox/blobs/s3test"
	"sealbox/kv"
	"sealbox/kv/pgtest"
	"sealbox/server"
	"sealbox/server/servertest"
)

// TestMain runs the suite in kv's retry test mode when
// SEALBOX_TEST_RERUN=1: every store update runs twice, the first run
// rolled back.
func TestMain(m *testing.M) {
	kv.RerunUpdatesForTests(os.Getenv("SEALBOX_TEST_RERUN") == "1")
	code := m.Run()
	pgtest.Stop()
	s3test.Stop()
	os.Exit(code)
}

// The server's tests speak servertest's vocabulary; its most used names
// read here without the package name.
type (
	Req      = servertest.Req
	Response = servertest.Response
	Tokens   = servertest.Tokens
)

// TestServer is servertest's server with the request helpers these tests
// declare beside the resource they exercise (ts.EnrollTOTP in totp_test.go,
// ts.TusPatch in tus_test.go, ts.WantMetric in health_test.go, ...).
type TestServer struct{ *servertest.TestServer }

// MustOpenServer is servertest.MustOpenServer.
func MustOpenServer(tb testing.TB, edit ...func(*server.Config)) *TestServer {
	tb.Helper()
	return &TestServer{servertest.MustOpenServer(tb, edit...)}
}

// MustOpenServerIn is servertest.MustOpenServerIn: a server over dir, which
// may already hold a prepared store.
func MustOpenServerIn(tb testing.TB, dir string, edit ...func(*server.Config)) *TestServer {
	tb.Helper()
	return &TestServer{servertest.MustOpenServerIn(tb, dir, edit...)}
}

// SecondNode is servertest's SecondNode: another node of ts's instance.
func (ts *TestServer) SecondNode(tb testing.TB) *TestServer {
	tb.Helper()
	return &TestServer{ts.TestServer.SecondNode(tb)}
}
