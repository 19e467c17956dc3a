package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sealbox/blobs"
	"sealbox/cli/client"
	"sealbox/cli/sealed"
	"sealbox/server"
	"sealbox/server/ids"
)

// measureSpec says what `dev measure` runs: the binary, the instance it
// serves and how many requests of each kind it times.
type measureSpec struct {
	Exe     string
	Loc     Location
	Scratch string
	// Samples is the number of timed requests of each kind; SignIns of
	// sign-ins, which each cost a password hash.
	Samples, SignIns int
	// Admin names the admin commands to time: check, gc, backup, restore,
	// and generations (two backups with --keep of the unchanged instance,
	// then a restore of the newest).
	Admin []string
	Out   io.Writer
}

// measurement is one figure of the table: a name and its value.
type measurement struct{ name, value string }

// measurer runs one measurement of a filled instance. Its requests go
// through the project's client (cli/client), each tried once: a retry
// would hide a refusal's time in a figure, and every answer but a 2xx
// fails the measurement.
type measurer struct {
	spec measureSpec
	fill fillReport
	base string
	rows []measurement
}

// client is a client of the instance, without a session, that tries each
// request once.
func (m *measurer) client() (*client.Client, error) {
	c, err := client.New(m.base, &http.Client{Timeout: time.Minute})
	if err != nil {
		return nil, err
	}
	c.UserAgent = "sealbox-dev-measure"
	c.Retry.Attempts = 1
	return c, nil
}

func (m *measurer) add(name, format string, args ...any) {
	m.rows = append(m.rows, measurement{name, fmt.Sprintf(format, args...)})
	fmt.Fprintf(m.spec.Out, "| %s | %s |\n", name, m.rows[len(m.rows)-1].value)
}

// measureInstance serves the filled instance with the binary and times its
// start and the requests of a large library, then stops it and times the
// admin commands, each a child process whose peak RSS the kernel reports.
func measureInstance(ctx context.Context, spec measureSpec) error {
	raw, err := os.ReadFile(filepath.Join(spec.Loc.Data, fillFile))
	if err != nil {
		return fmt.Errorf("%w (dev measure measures an instance dev fill made)", err)
	}
	m := &measurer{spec: spec}
	if err := json.Unmarshal(raw, &m.fill); err != nil || len(m.fill.Accounts) == 0 || m.fill.Accounts[0].AccessToken == "" {
		return fmt.Errorf("%s is not a fill file dev fill wrote", fillFile)
	}
	fmt.Fprintf(spec.Out, "| %s | %d items, %d ops, %d blobs (%s), %d sessions, %d shares |\n|---|---|\n",
		"store", m.fill.Items, m.fill.Ops, m.fill.Blobs, FormatSize(m.fill.Bytes), m.fill.Sessions, m.fill.Shares)
	if err := m.serve(ctx); err != nil {
		return err
	}
	return m.admin(ctx)
}

// serve starts the server, times its start and the requests, and stops it.
func (m *measurer) serve(ctx context.Context) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := l.Addr().String()
	l.Close()
	m.base = "http://" + addr
	args := append([]string{"serve", "--listen", addr, "--log-level", "error",
		// The measurement is one client address: the limits a crowd of
		// them would meet stay out of the way.
		"--auth-burst", "1000000", "--auth-rate", "1e9", "--share-burst", "1000000", "--share-rate", "1e9"}, m.spec.Loc.args()...)
	cmd := exec.CommandContext(ctx, m.spec.Exe, args...)
	cmd.Stderr = os.Stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	if err := m.waitReady(ctx, start); err != nil {
		return err
	}
	m.add("startup (to /readyz 200)", "%s", time.Since(start).Round(time.Millisecond))
	m.add("serve RSS / anon RSS after startup", "%s / %s", FormatSize(procStatus(cmd.Process.Pid, "VmRSS")),
		FormatSize(procStatus(cmd.Process.Pid, "RssAnon")))
	if err := m.requests(ctx); err != nil {
		return err
	}
	m.add("serve peak RSS / anon RSS after the requests", "%s / %s", FormatSize(procStatus(cmd.Process.Pid, "VmHWM")),
		FormatSize(procStatus(cmd.Process.Pid, "RssAnon")))
	stopped = true
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	return cmd.Wait()
}

// waitReady polls /readyz until it answers 200.
func (m *measurer) waitReady(ctx context.Context, start time.Time) error {
	c, err := m.client()
	if err != nil {
		return err
	}
	for time.Since(start) < 10*time.Minute {
		if c.Ready(ctx) == nil {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return errors.New("the server did not become ready in 10 minutes")
}

// requests times each kind of request: feed pages of the largest album,
// share reads, op applies and sign-ins.
func (m *measurer) requests(ctx context.Context) error {
	acct := m.fill.Accounts[0]
	album := acct.Albums[0]
	owner, err := m.client()
	if err != nil {
		return err
	}
	owner.SetTokens(client.Tokens{Access: acct.AccessToken})
	pages := []struct {
		name  string
		after uint64
	}{{"first", 0}, {"middle", album.SyncSeq / 2}, {"last", album.SyncSeq - min(album.SyncSeq, 500)}}
	for _, p := range pages {
		if err := m.time("feed "+p.name+" page (500 entries)", m.spec.Samples, func(int) error {
			_, err := owner.Feed(ctx, album.ID, p.after, 0)
			return err
		}); err != nil {
			return err
		}
	}
	if len(acct.Shares) > 0 {
		viewer, err := m.client()
		if err != nil {
			return err
		}
		if err := m.time("share blob read", m.spec.Samples, func(i int) error {
			sh := acct.Shares[i%len(acct.Shares)]
			r, err := viewer.ReadSharedBlob(ctx, sh.OpaqueID, sh.Hash, 0, -1)
			if err != nil {
				return err
			}
			defer r.Close()
			_, err = io.Copy(io.Discard, r)
			return err
		}); err != nil {
			return err
		}
	}
	if err := m.time("op apply (create)", m.spec.Samples, func(int) error {
		_, err := owner.ApplyOp(ctx, album.ID, measureOp(acct, album.ID))
		return err
	}); err != nil {
		return err
	}
	// A client of its own: a sign-in keeps the pair it gets, and the
	// owner's session must stay the fill's.
	signIn, err := m.client()
	if err != nil {
		return err
	}
	return m.time("sign-in", m.spec.SignIns, func(i int) error {
		a := m.fill.Accounts[i%len(m.fill.Accounts)]
		_, _, err := signIn.Login(ctx, a.Email, m.fill.Password, "")
		return err
	})
}

// time makes n calls one after another (after a few untimed ones to warm
// the connection and the caches) and adds their p50 and p99; a call that
// fails fails the measurement.
func (m *measurer) time(name string, n int, call func(i int) error) error {
	const warm = 5
	took := make([]time.Duration, 0, n)
	for i := range n + warm {
		start := time.Now()
		if err := call(i); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if i >= warm {
			took = append(took, time.Since(start))
		}
	}
	slices.Sort(took)
	m.add(name+" p50 / p99", "%s / %s", percentile(took, 50), percentile(took, 99))
	return nil
}

// percentile is the p-th percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (len(sorted)*p + 99) / 100
	return sorted[max(rank, 1)-1].Round(time.Microsecond)
}

// measureOp is a create of a new asset whose ciphertext is a blob the
// account holds, with a fresh manifest and metadata blob (random bytes: the
// server never opens them).
func measureOp(acct fillAccount, albumID string) client.Op {
	manifest, metadata := []byte(randomHex(200)), []byte(randomHex(150))
	metadataHash := blobs.AddressOf(metadata)
	return client.Op{
		ManifestEnvelope: sealed.Envelope{
			CryptoSuiteID: 1, ProtocolVersion: server.DefaultConfig().ProtocolMax,
			AlbumID: albumID, FileID: ids.UUID(rand.Reader), AMKVersion: 0,
			CiphertextHash: acct.Original, PlaintextSize: 1000, ChunkSize: 65536, KeyMode: "derived",
			MetadataBlobHash: &metadataHash, CreatedByUser: acct.ID,
			CreatedByDevice: "00000000-0000-4000-8000-000000000000", ClientVersion: "sealbox-dev-measure",
			Timestamp: time.Now().UTC().Format(time.RFC3339), Action: "create",
		},
		ManifestCBOR: manifest,
		MetadataBlob: metadata,
	}
}

// admin times check --deep, gc, backup and restore, and the generations
// runs, each run as a child process of the binary. A backup with --keep also
// reports the bytes it added to the backup disk (generationBytes).
func (m *measurer) admin(ctx context.Context) error {
	scratch, err := os.MkdirTemp(m.spec.Scratch, "sealbox-measure-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	backup, restored := filepath.Join(scratch, "backup"), filepath.Join(scratch, "restored")
	gens, genRestored := filepath.Join(scratch, "generations"), filepath.Join(scratch, "restored-generation")
	keep := append([]string{"backup", gens, "--keep", "7"}, m.spec.Loc.args()...)
	for _, run := range []struct {
		name, kind string
		args       []string
	}{
		{"check --deep", "check", append([]string{"check", "--deep"}, m.spec.Loc.args()...)},
		{"gc", "gc", append([]string{"gc"}, m.spec.Loc.args()...)},
		{"backup", "backup", append([]string{"backup", backup}, m.spec.Loc.args()...)},
		{"restore", "restore", []string{"restore", backup, "--data", restored}},
		{"backup --keep 7, first generation", "generations", keep},
		{"backup --keep 7, second generation (unchanged)", "generations", keep},
		{"restore of the newest generation", "generations", []string{"restore", gens, "--data", genRestored}},
	} {
		if !slices.Contains(m.spec.Admin, run.kind) {
			continue
		}
		var before int64
		if run.args[0] == "backup" && run.kind == "generations" {
			if before, err = diskBytes(gens); err != nil {
				return err
			}
		}
		cmd := exec.CommandContext(ctx, m.spec.Exe, run.args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		anon, err := runSampled(cmd)
		if err != nil {
			return fmt.Errorf("%s: %w\n%s", run.name, err, out.Bytes())
		}
		took := time.Since(start).Round(time.Millisecond)
		if run.args[0] == "backup" && run.kind == "generations" {
			after, err := diskBytes(gens)
			if err != nil {
				return err
			}
			m.add(run.name+" wall / peak RSS / peak anon RSS / bytes added", "%s / %s / %s / %s", took,
				FormatSize(peakRSS(cmd.ProcessState)), FormatSize(anon), FormatSize(after-before))
			continue
		}
		m.add(run.name+" wall / peak RSS / peak anon RSS", "%s / %s / %s", took,
			FormatSize(peakRSS(cmd.ProcessState)), FormatSize(anon))
	}
	return nil
}

// diskBytes is the size of the regular files under root, each file once
// however many hard links name it: what the backup disk holds. A missing
// root holds nothing.
func diskBytes(root string) (int64, error) {
	seen := map[[2]uint64]bool{}
	var total int64
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if errors.Is(err, os.ErrNotExist) && path == root {
			return filepath.SkipDir
		}
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			id := [2]uint64{uint64(st.Dev), st.Ino}
			if seen[id] {
				return nil
			}
			seen[id] = true
		}
		total += fi.Size()
		return nil
	})
	return total, err
}

// runSampled runs cmd and returns the largest anonymous resident set it was
// seen with (sampled every 10 ms). The kernel's peak RSS also counts the
// pages of files the process maps, and a bbolt store is read through a map
// of its file: those pages are the page cache, which the kernel takes back
// under pressure, while anonymous memory is what the process needs.
func runSampled(cmd *exec.Cmd) (int64, error) {
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var anon int64
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return anon, err
		case <-tick.C:
			anon = max(anon, procStatus(cmd.Process.Pid, "RssAnon"))
		}
	}
}

// args are the flags that point a command of the binary at l.
func (l Location) args() []string {
	out := []string{"--data", l.Data}
	if l.Store != "" {
		out = append(out, "--store", l.Store)
	}
	if l.Blobs != "" {
		out = append(out, "--blobs", l.Blobs)
	}
	return out
}

// procStatus reads a size field (VmRSS, VmHWM) of a process's
// /proc/PID/status, in bytes; 0 where there is no /proc.
func procStatus(pid int, field string) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(raw)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
