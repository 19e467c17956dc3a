package cli

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io/fs"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"filippo.io/torchwood"
	"github.com/spf13/pflag"

	"sealbox/server"
)

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"4096", 4096, true}, {"64KiB", 64 << 10, true}, {"1MiB", 1 << 20, true}, {"16GiB", 16 << 30, true},
		{"2 TiB", 2 << 40, true}, {"10KB", 10_000, true}, {"0", 0, true}, {"12B", 12, true},
		{"", 0, false}, {"-1", 0, false}, {"1.5GiB", 0, false}, {"GiB", 0, false}, {"9999999999TiB", 0, false}, {"1XB", 0, false},
	}
	for _, tc := range cases {
		got, err := ParseSize(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseSize(%q): got %d, %v; want %d, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestServeFlagsReadEnvironment(t *testing.T) {
	t.Setenv("SEALBOX_MAX_BODY", "64KiB")
	t.Setenv("SEALBOX_REGISTRATION", "closed")
	t.Setenv("SEALBOX_ACCESS_TTL", "5m")
	t.Setenv("SEALBOX_MAX_SHARE_LINKS", "50")
	cmd := newServeCmd()
	if err := cmd.ParseFlags([]string{"--access-ttl", "7m"}); err != nil {
		t.Fatal(err)
	}
	if _, err := bindEnv(cmd); err != nil {
		t.Fatal(err)
	}
	get := func(name string) string { return cmd.Flags().Lookup(name).Value.String() }
	if got := get("max-body"); got != "64KiB" {
		t.Errorf("max-body: got %s", got)
	}
	if got := get("max-share-links"); got != "50" {
		t.Errorf("max-share-links: got %s", got)
	}
	if got := get("registration"); got != "closed" {
		t.Errorf("registration: got %s", got)
	}
	if got := get("access-ttl"); got != "7m0s" {
		t.Errorf("a flag on the command line must win over the environment: got %s", got)
	}
}

func TestServeRejectsBadEnvironment(t *testing.T) {
	t.Setenv("SEALBOX_MAX_BODY", "lots")
	root := NewRootCmd()
	root.SetArgs([]string{"serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0"})
	if err := root.Execute(); err == nil {
		t.Fatal("a malformed SEALBOX_MAX_BODY was accepted")
	}
}

// TestServeRunCreatesDataAndShutsDown starts the real serve path on a new
// data directory, serves a request, and shuts down when the context ends.
// cliFlag names flags as typed on the command line.
func cliFlag(flag string) string { return "--" + flag }

// runServeCmd runs `sealbox serve args...` and returns its error and what it
// wrote to standard error. ctx ends the server if it starts.
func runServeCmd(ctx context.Context, args ...string) (string, error) {
	var stderr bytes.Buffer
	root := NewRootCmd()
	root.SetArgs(append([]string{"serve"}, args...))
	root.SetErr(&stderr)
	root.SetOut(&stderr)
	err := root.ExecuteContext(ctx)
	return stderr.String(), err
}

// A value refused after binding names where it came from: the variable when
// the environment set it, the flag when the command line did.
func TestServeNamesTheSourceOfABadValue(t *testing.T) {
	for _, tc := range []struct {
		name, env, value string
		args             []string
		want             string
	}{
		{"registration from the environment", "SEALBOX_REGISTRATION", "maybe", nil, "SEALBOX_REGISTRATION must be open, closed or invite"},
		{"registration on the command line", "", "", []string{"--registration", "maybe"}, "--registration must be open, closed or invite"},
		{"album protocol from the environment", "SEALBOX_ALBUM_PROTOCOL", "2020-01-01", nil, "SEALBOX_ALBUM_PROTOCOL 2020-01-01 is outside"},
		{"size from the environment", "SEALBOX_MAX_BODY", "lots", nil, "SEALBOX_MAX_BODY: invalid size"},
		{"log level from the environment", "SEALBOX_LOG_LEVEL", "loud", nil, "SEALBOX_LOG_LEVEL must be one of debug, info, warn, error"},
		{"log level on the command line", "", "", []string{"--log-level", "trace"}, "--log-level must be one of"},
		{"witness from the environment", "SEALBOX_WITNESS", "no-key", nil, `SEALBOX_WITNESS: witness "no-key": want VKEY=URL`},
		{"witness key on the command line", "", "", []string{"--witness", "nope=http://w"}, "--witness: witness \"nope\": not a cosignature verifier key"},
		// Two witnesses, comma-separated in one variable.
		{"quorum above the witnesses", "SEALBOX_WITNESS", testWitness + "," + testWitness, []string{"--witness-quorum", "3"}, "--witness-quorum 3: must be between 1 and the 2 witnesses given (SEALBOX_WITNESS)"},
		{"quorum without witnesses", "SEALBOX_WITNESS_QUORUM", "1", nil, "SEALBOX_WITNESS_QUORUM 1: must be between 1 and the 0 witnesses given"},
		{"checkpoint interval too short", "", "", []string{"--checkpoint-interval", "1ms"}, "--checkpoint-interval must be at least 100ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(tc.env, tc.value)
			}
			dir := filepath.Join(t.TempDir(), "data")
			_, err := runServeCmd(context.Background(), append([]string{"--data", dir, "--listen", "127.0.0.1:0"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
			if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Fatal("a refused configuration created the data directory")
			}
		})
	}
}

// testWitness is a witness flag value that parses: a cosignature verifier
// key and a URL.
const testWitness = "witness.example/w+5133a903+BLAL4Um6fsiGjphLWnailx4GsIMy7hf4tBjBoOFV4auG=http://127.0.0.1:1"

// serve --help names the environment variable of every flag.
func TestServeHelpNamesEveryVariable(t *testing.T) {
	var out bytes.Buffer
	root := NewRootCmd()
	root.SetArgs([]string{"serve", "--help"})
	root.SetOut(&out)
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	n := 0
	newServeCmd().Flags().VisitAll(func(f *pflag.Flag) {
		if f.Deprecated != "" {
			return // hidden from --help on purpose: TestHashQueueIsDeprecated
		}
		n++
		if !strings.Contains(out.String(), "--"+f.Name) || !strings.Contains(out.String(), "[$"+envName(f.Name)+"]") {
			t.Errorf("serve --help does not name %s for --%s", envName(f.Name), f.Name)
		}
	})
	if n < 20 {
		t.Fatalf("only %d flags visited", n)
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.5 KiB", 50 << 30: "50 GiB", 5 << 40: "5 TiB", 1<<63 - 1: "8 EiB"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d): got %q, want %q", n, got, want)
		}
	}
}

func TestUnknownEnvironment(t *testing.T) {
	env := []string{"SEALBOX_REGISTRATON=closed", "SEALBOX_DATA=/srv", "SEALBOX_MAX_BODY=1MiB", "HOME=/root", "SEALBOX_REGISTRATON=again", "SEALBOX_A="}
	if got := unknownEnv(env, NewRootCmd()); !slices.Equal(got, []string{"SEALBOX_A", "SEALBOX_REGISTRATON"}) {
		t.Fatalf("unknown: %q", got)
	}
}

// TestHashQueueIsDeprecated: --hash-queue, which bounded the password
// hashing queue by a count before --hash-wait bounded it by time, still
// parses, so a unit file that sets it starts; it warns and is ignored.
func TestHashQueueIsDeprecated(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := filepath.Join(t.TempDir(), "data")
	stderr, err := runServeCmd(context.Background(), "--data", dir, "--listen", busy.Addr().String(), "--hash-queue", "64")
	if err == nil || !strings.Contains(err.Error(), "listen on "+busy.Addr().String()) {
		t.Fatalf("got %v, want the flags accepted and a listen error", err)
	}
	if !strings.Contains(stderr, "--hash-queue has been deprecated") || !strings.Contains(stderr, "--hash-wait") {
		t.Fatalf("no deprecation warning naming --hash-wait: %q", stderr)
	}
}

// A busy port fails before anything is created in the data directory; the
// warning about a misspelt variable is written before that, unless the log
// level hides warnings.
func TestServeBusyPortCreatesNothing(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	t.Setenv("SEALBOX_REGISTRATON", "closed")
	dir := filepath.Join(t.TempDir(), "data")
	stderr, err := runServeCmd(context.Background(), "--data", dir, "--listen", busy.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "listen on "+busy.Addr().String()) {
		t.Fatalf("got %v, want a listen error", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("serve created the data directory though its port was busy")
	}
	if !strings.Contains(stderr, "SEALBOX_REGISTRATON") || !strings.Contains(stderr, "unknown SEALBOX_ environment variable") {
		t.Fatalf("no warning about the unknown variable: %q", stderr)
	}
	stderr, _ = runServeCmd(context.Background(), "--data", dir, "--listen", busy.Addr().String(), "--log-level", "error")
	if strings.Contains(stderr, "SEALBOX_REGISTRATON") {
		t.Fatalf("--log-level error still wrote a warning: %q", stderr)
	}
}

// TestServeWarnsOfPlainHTTP: a CORS origin or a witness URL that is plain
// http to another host is warned about at start (before the port is
// tried); one on this host, or https, is not. The warning shows a witness
// URL without its user name and password.
func TestServeWarnsOfPlainHTTP(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, err := torchwood.NewCosignatureSigner("witness.example/plain", priv)
	if err != nil {
		t.Fatal(err)
	}
	vkey := signer.Verifier().String()
	stderr, _ := runServeCmd(context.Background(), "--data", filepath.Join(t.TempDir(), "data"), "--listen", busy.Addr().String(),
		"--cors-origin", "http://photos.example.org,http://127.0.0.1:5173,http://localhost:8080,https://app.example.org,http://[::1]:3000",
		"--witness", vkey+"=http://alice:s3cret@witness.example/w",
		"--witness", vkey+"=http://127.0.0.1:9999",
		"--witness", vkey+"=https://witness.example/secure")
	var warned []string
	for line := range strings.Lines(stderr) {
		if strings.Contains(line, "plain http") {
			warned = append(warned, line)
		}
	}
	if len(warned) != 2 || !strings.Contains(warned[0], `"origin":"http://photos.example.org"`) ||
		!strings.Contains(warned[1], `"url":"http://xxxxx@witness.example/w"`) {
		t.Fatalf("warnings: %q", warned)
	}
	if strings.Contains(stderr, "s3cret") || strings.Contains(stderr, "alice") {
		t.Fatalf("the witness URL's credentials were written: %q", stderr)
	}
}

func TestServeRunCreatesDataAndShutsDown(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "data")
	ready := make(chan string, 1)
	s := &Serve{Location: Location{Data: dir}, Listen: "127.0.0.1:0", Config: server.DefaultConfig(), Ready: func(u string) { ready <- u }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var url string
	select {
	case url = <-ready:
	case err := <-done:
		t.Fatalf("serve stopped: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not start")
	}
	resp, err := http.Get(url + "/v1/version")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("version: %v", err)
	}
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, dbFile)); err != nil {
		t.Fatalf("no database in the data directory: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, blobsDir)); err != nil || !fi.IsDir() {
		t.Fatalf("no blob store in the data directory: %v", err)
	}
}

func TestServeProtocolAndBlobFlags(t *testing.T) {
	f := newServeCmd().Flags()
	for name, want := range map[string]string{
		"protocol-min": "2025-01-15", "protocol-max": "2026-09-01", "album-protocol": "", "max-blob": "16GiB",
		"share-rate": "20", "share-burst": "200", "max-share-links": "1000", "max-share-serves": "100000",
		"upgrade-window": "15m0s",
	} {
		if got := f.Lookup(name).DefValue; got != want {
			t.Errorf("--%s default: got %q, want %q", name, got, want)
		}
	}
	// An unset --album-protocol is accepted and left unset: the server
	// pins new albums to --protocol-max then (server.Config, checked by
	// server's TestAlbumProtocolDefaultsToProtocolMax).
	cfg := server.DefaultConfig()
	if err := validateConfig(&cfg, cliFlag); err != nil || cfg.AlbumProtocol != "" {
		t.Fatalf("an unset --album-protocol: %q, %v; want it accepted and left to the server", cfg.AlbumProtocol, err)
	}
	for _, tc := range []struct {
		name string
		edit func(*server.Config)
	}{
		{"min not a date", func(c *server.Config) { c.ProtocolMin = "2025-1-15" }},
		{"max not a date", func(c *server.Config) { c.ProtocolMax = "yesterday" }},
		{"min after max", func(c *server.Config) { c.ProtocolMin = "2027-01-01" }},
		{"album before min", func(c *server.Config) { c.AlbumProtocol = "2024-12-31" }},
		{"album after max", func(c *server.Config) { c.AlbumProtocol = "2026-09-02" }},
		{"album not a date", func(c *server.Config) { c.AlbumProtocol = "2026-9-1" }},
		{"max-blob zero", func(c *server.Config) { c.MaxBlob = 0 }},
		{"share-rate zero", func(c *server.Config) { c.ShareRate = 0 }},
		{"share-rate negative", func(c *server.Config) { c.ShareRate = -1 }},
		{"share-rate NaN", func(c *server.Config) { c.ShareRate = math.NaN() }},
		{"share-rate infinite", func(c *server.Config) { c.ShareRate = math.Inf(1) }},
		{"share-burst zero", func(c *server.Config) { c.ShareBurst = 0 }},
		{"share bucket spans centuries", func(c *server.Config) { c.ShareRate, c.ShareBurst = 1e-9, 1000 }},
		{"upgrade-window zero", func(c *server.Config) { c.UpgradeWindow = 0 }},
		{"max-share-links zero", func(c *server.Config) { c.MaxShareLinks = 0 }},
		{"max-share-serves below one link's most", func(c *server.Config) { c.MaxShareServes = 9_999 }},
	} {
		cfg := server.DefaultConfig()
		tc.edit(&cfg)
		if err := validateConfig(&cfg, cliFlag); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}

func TestLoadSealKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), keyFile)
	var made []newFile
	key, err := readSealKey(path, &made)
	if err != nil {
		t.Fatal(err)
	}
	if len(key) != 32 {
		t.Fatalf("key length: got %d, want 32", len(key))
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the key was written before the start wrote what it made: %v", err)
	}
	if err := writeNewFiles(made); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode != 0o600 {
		t.Fatalf("key file mode: got %o, want 600", mode)
	}
	made = nil
	again, err := readSealKey(path, &made)
	if err != nil || len(made) != 0 {
		t.Fatalf("reading the key again: %v, %d files made", err, len(made))
	}
	if !bytes.Equal(again, key) {
		t.Fatal("a second start made a new key: every sealed secret would be lost")
	}
}

func TestLoadSealKeyRefusesWrongSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), keyFile)
	if err := os.WriteFile(path, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	var made []newFile
	if _, err := readSealKey(path, &made); err == nil {
		t.Fatal("a 5-byte key file was accepted")
	}
	if b, _ := os.ReadFile(path); string(b) != "short" {
		t.Fatal("a bad key file was replaced")
	}
}

// The data directory gets its key on first start and the server seals with
// it.
func TestServeCreatesKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s := &Serve{Location: Location{Data: dir}, Listen: "127.0.0.1:0", Config: server.DefaultConfig()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan struct{})
	s.Ready = func(string) { close(ready) }
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(filepath.Join(dir, keyFile))
	if err != nil || len(key) != 32 {
		t.Fatalf("server key after first start: %d bytes, %v", len(key), err)
	}
	if !bytes.Equal(s.Config.SealKey, key) {
		t.Fatal("the server was not given the key file's key")
	}
}

func TestShareRateFlagTakesAFraction(t *testing.T) {
	t.Setenv("SEALBOX_SHARE_RATE", "0.5")
	cmd := newServeCmd()
	if err := cmd.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := bindEnv(cmd); err != nil {
		t.Fatal(err)
	}
	if got, _ := cmd.Flags().GetFloat64("share-rate"); got != 0.5 {
		t.Fatalf("share-rate: got %v", got)
	}
}

// --cors-origin takes origins exactly as a browser sends them in Origin,
// which the server compares byte for byte; anything else is refused at
// start, naming the value.
func TestCORSOriginFlag(t *testing.T) {
	for _, o := range []string{"https://photos.example.org", "http://127.0.0.1:5173", "https://[::1]:8443", "http://localhost"} {
		if err := server.CheckOrigin(o); err != nil {
			t.Errorf("%s: %v", o, err)
		}
	}
	for _, o := range []string{"", "*", "null", "photos.example.org", "https://photos.example.org/", "https://photos.example.org/app",
		"https://Photos.example.org", "HTTPS://photos.example.org", "https://photos.example.org:443", "http://a.example:80",
		"https://user@photos.example.org", "https://photos.example.org?x", "https://photos.example.org#x", "ftp://photos.example.org",
		"https://", "https://photos.example.org:", " https://photos.example.org",
		"http://*.example.org", "https://*.example.org", "https://*", "https://photos.*.org:8443"} {
		if err := server.CheckOrigin(o); err == nil {
			t.Errorf("%q accepted", o)
		}
	}
	t.Setenv("SEALBOX_CORS_ORIGIN", "https://app.example,https://app.example/")
	dir := filepath.Join(t.TempDir(), "data")
	_, err := runServeCmd(context.Background(), "--data", dir, "--listen", "127.0.0.1:0")
	if err == nil || !strings.Contains(err.Error(), `SEALBOX_CORS_ORIGIN: "https://app.example/" is not an origin`) {
		t.Fatalf("got %v, want the variable and the value named", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("a refused origin created the data directory")
	}
}

// A busy --share-listen port fails before anything is created, like a
// busy --listen.
func TestServeBusySharePortCreatesNothing(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := filepath.Join(t.TempDir(), "data")
	_, err = runServeCmd(context.Background(), "--data", dir, "--listen", "127.0.0.1:0", "--share-listen", busy.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "share listener: listen on "+busy.Addr().String()) {
		t.Fatalf("got %v, want a listen error", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("serve created the data directory though its share port was busy")
	}
}

// TestServeListenAddressMistakes: a port without a host names the two
// addresses meant, and a port another process holds says so, both before
// the data directory is created.
func TestServeListenAddressMistakes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	_, err := runServeCmd(t.Context(), "--data", dir, "--listen", "8080")
	if err == nil || err.Error() != `--listen "8080" is a port without a host: write 127.0.0.1:8080 (this machine only) or :8080 (every interface)` {
		t.Fatalf("serve --listen 8080: %v", err)
	}
	t.Setenv("SEALBOX_METRICS_LISTEN", "localhost")
	_, err = runServeCmd(t.Context(), "--data", dir, "--listen", "127.0.0.1:0")
	if err == nil || err.Error() != `SEALBOX_METRICS_LISTEN "localhost" is not HOST:PORT, such as 127.0.0.1:8080 (this machine only) or :8080 (every interface)` {
		t.Fatalf("serve with SEALBOX_METRICS_LISTEN=localhost: %v", err)
	}
	t.Setenv("SEALBOX_METRICS_LISTEN", "")
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	_, err = runServeCmd(t.Context(), "--data", dir, "--listen", held.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "listen on "+held.Addr().String()+": ") ||
		!strings.Contains(err.Error(), "address already in use: another process holds that port, maybe another sealbox serve; stop it or listen on another port") {
		t.Fatalf("serve on a port another process holds: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused serve created its data directory: %v", err)
	}
}

// TestSizeFlagsShowUnits: --help shows a size flag's default in the unit a
// person writes it in (16GiB, not 17179869184), a form the flag reads back;
// a size no unit divides stays in bytes.
func TestSizeFlagsShowUnits(t *testing.T) {
	out, _ := mustCLI(t, "", "serve", "--help")
	for _, want := range []string{"(e.g. 16GiB) [$SEALBOX_MAX_BLOB] (default 16GiB)", "[$SEALBOX_MAX_BODY] (default 1MiB)", "[$SEALBOX_INLINE_MAX] (default 16KiB)", "[$SEALBOX_MAX_PENDING_BYTES] (default 64GiB)"} {
		if !strings.Contains(out, want) {
			t.Errorf("serve --help lacks %q", want)
		}
	}
	for _, n := range []int64{0, 1000, 1536, 3 << 40, 5 << 20} {
		v := n
		text := sizeFlag{&v}.String()
		var back int64
		if err := (sizeFlag{&back}).Set(text); err != nil || back != n {
			t.Errorf("%d prints as %q, which reads back as %d (%v)", n, text, back, err)
		}
	}
	if got := (sizeFlag{new(int64)}).String(); got != "0" {
		t.Errorf("0 prints as %q", got)
	}
	v := int64(1536)
	if got := (sizeFlag{&v}).String(); got != "1536" {
		t.Errorf("1536 prints as %q, want 1536", got)
	}
}

// TestLockoutHelpSaysPerEmail: serve's --help and the README's tables say
// what the lockout counts, the failures against one account email
// (registered or not), not against a client address.
func TestLockoutHelpSaysPerEmail(t *testing.T) {
	out, _ := mustCLI(t, "", "serve", "--help")
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "--lockout-failures") {
			line = l
		}
	}
	if !strings.Contains(line, "consecutive failed password checks against one account email (registered or not) that lock sign-ins to it") {
		t.Errorf("serve --help does not say the lockout counts per account email: %q", line)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| `--lockout-failures` | `SEALBOX_LOCKOUT_FAILURES` | `10` | Consecutive failed password checks against one account email (registered or not) that lock sign-ins to it. |",
		"| Failed password checks before a lockout (per account email, registered or not) |",
	} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("the README lacks %q", want)
		}
	}
}
