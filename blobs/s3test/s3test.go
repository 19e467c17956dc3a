// Package s3test gives tests a real S3 server: with SEALBOX_TEST_S3=1, a
// versitygw gateway (github.com/versity/versitygw, pinned in
// testdata/tools) that this test process starts on 127.0.0.1 over a temp
// directory and stops in Stop; with SEALBOX_TEST_S3 set to an http(s) URL,
// the S3 server there, reached with the AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY already set. Every caller of URL gets an empty
// bucket of its own. Unset, the suites run on local files and URL answers
// "".
//
// versitygw is built once per pinned version into the user's cache
// directory (testtools.Build), so repeated runs do not rebuild it. A gateway that cannot be built or
// started fails the test that asked for it, never skips it.
package s3test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sealbox/blobs/s3"
	"sealbox/testdata/testtools"
)

// The credentials of the gateway this process starts.
const (
	accessKey = "sealboxtest"
	secretKey = "sealboxtest-secret"
)

// Enabled reports whether the suites are asked to run on S3.
func Enabled() bool { return os.Getenv("SEALBOX_TEST_S3") != "" }

var (
	once     sync.Once
	endpoint string    // the server's base URL
	gateway  *exec.Cmd // the gateway this process started
	root     string    // its directory
	failure  error
)

// URL returns s3://BUCKET?endpoint=URL&region=us-east-1 for a fresh, empty
// bucket on the test server, or "" when SEALBOX_TEST_S3 is unset. A server
// that cannot be built, started or reached fails the test: it was asked
// for.
func URL(tb testing.TB) string {
	tb.Helper()
	if !Enabled() {
		return ""
	}
	once.Do(func() { endpoint, failure = start() })
	if failure != nil {
		tb.Fatalf("SEALBOX_TEST_S3 is set but no S3 server is available: %v", failure)
	}
	var b [8]byte
	rand.Read(b[:])
	u := "s3://b-" + hex.EncodeToString(b[:]) + "?endpoint=" + endpoint + "&region=us-east-1"
	if err := s3.CreateBucket(context.Background(), u, s3.Options{}); err != nil {
		tb.Fatal(err)
	}
	return u
}

// Open opens a fresh bucket (URL) as a blobs engine with opts.
func Open(tb testing.TB, opts s3.Options) *s3.Engine {
	tb.Helper()
	s, err := s3.Open(context.Background(), URL(tb), opts)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// Stop stops the gateway this process started, if any, and removes its
// directory. A TestMain calls it after the tests.
func Stop() {
	if gateway != nil {
		gateway.Process.Kill()
		gateway.Wait()
	}
	if root != "" {
		os.RemoveAll(root)
	}
}

func start() (string, error) {
	if v := os.Getenv("SEALBOX_TEST_S3"); v != "1" {
		if !strings.HasPrefix(v, "http://") && !strings.HasPrefix(v, "https://") {
			return "", fmt.Errorf("SEALBOX_TEST_S3 is %q; want 1 or an http(s) URL", v)
		}
		return strings.TrimSuffix(v, "/"), nil
	}
	bin, err := testtools.Build("versitygw", "github.com/versity/versitygw", "github.com/versity/versitygw/cmd/versitygw")
	if err != nil {
		return "", err
	}
	if root, err = os.MkdirTemp("", "sealbox-s3-*"); err != nil {
		return "", err
	}
	data, meta := filepath.Join(root, "data"), filepath.Join(root, "meta")
	for _, d := range []string{data, meta} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return "", err
		}
	}
	addr, err := testtools.FreeAddr()
	if err != nil {
		return "", err
	}
	// Metadata goes to a sidecar directory, so the temp filesystem needs
	// no extended attributes.
	gateway = exec.Command(bin, "--access", accessKey, "--secret", secretKey, "--port", addr, "--quiet",
		"posix", "--sidecar", meta, data)
	log, err := os.Create(filepath.Join(root, "log"))
	if err != nil {
		return "", err
	}
	gateway.Stdout, gateway.Stderr = log, log
	testtools.DieWithParent(gateway)
	if err := gateway.Start(); err != nil {
		return "", err
	}
	os.Setenv("AWS_ACCESS_KEY_ID", accessKey)
	os.Setenv("AWS_SECRET_ACCESS_KEY", secretKey)
	url := "http://" + addr
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get(url + "/")
		if err == nil {
			resp.Body.Close()
			return url, nil
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(filepath.Join(root, "log"))
			return "", fmt.Errorf("versitygw did not answer on %s: %v\n%s", addr, err, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
