package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"sealbox/kv"
	"sealbox/kv/bolt"
	"sealbox/kv/kvtest"
)

// TestCompactCommand: compact refuses while a server runs on the data
// directory (through its socket) or another process holds the store, and
// says so; with the server stopped it compacts, reports both sizes and how
// to delete the old file, and the server starts again on the result with
// every account. On PostgreSQL it says autovacuum does this and does
// nothing.
func TestCompactCommand(t *testing.T) {
	dir := t.TempDir()
	_, stop := runServe(t, dir)
	for _, email := range []string{"a@example.org", "b@example.org"} {
		mustCLI(t, "correct horse battery staple\n", "users", "add", email, "--password-stdin", "--data", dir)
	}
	_, _, err := runCLI(t, "", "compact", "--data", dir)
	if err == nil || !strings.Contains(err.Error(), "a server is running") || !strings.Contains(err.Error(), "stop it") {
		t.Fatalf("compact while the server runs: %v", err)
	}
	stop()

	s, err := kvtest.Open(filepath.Join(dir, dbFile), kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = runCLI(t, "", "compact", "--data", dir)
	s.Close()
	if err == nil || !strings.Contains(err.Error(), "held by another process") {
		t.Fatalf("compact while another process holds the store: %v", err)
	}

	out, _ := mustCLI(t, "", "compact", "--data", dir)
	old := filepath.Join(dir, dbFile+".old")
	if !strings.Contains(out, "compacted "+filepath.Join(dir, dbFile)) || !strings.Contains(out, "before") || !strings.Contains(out, "rm "+old) {
		t.Fatalf("compact said %q", out)
	}
	if _, err := os.Stat(old); err != nil {
		t.Fatalf("the old store is not kept: %v", err)
	}
	startServe(t, dir)
	if users := usersJSON(t, dir); len(users) != 2 {
		t.Fatalf("after compaction the server has %d users, want 2", len(users))
	}

	if _, _, err := runCLI(t, "", "compact", "--data", t.TempDir()); err == nil || !strings.Contains(err.Error(), "holds no sealbox store") {
		t.Fatalf("compact of a directory without a store: %v", err)
	}
	empty := t.TempDir()
	out, _ = mustCLI(t, "", "compact", "--data", empty, "--store", "postgres://sealbox@127.0.0.1:1/sealbox")
	if !strings.Contains(out, "autovacuum") {
		t.Fatalf("compact on PostgreSQL said %q", out)
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Fatalf("compact on PostgreSQL wrote %d files", len(entries))
	}
}

// TestCompactKilledMidwayLeavesTheStoreWhole: the real binary, killed with
// SIGKILL while it writes the compacted copy, leaves sealbox.db whole
// (every record there, bbolt's page check clean) beside a stale
// sealbox.db.compact, which the next compaction replaces.
func TestCompactKilledMidwayLeavesTheStoreWhole(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills it")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	path := filepath.Join(dir, dbFile)
	const payloads = 384
	s, err := kvtest.Open(path, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour)
	if err := s.IssueEnrollmentCode("acct-1", "sbx_en_1", "222222222222", exp); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RedeemEnrollmentCode("sbx_en_1", false, func([]byte) string { return "sbx_rl_1" }, exp, kv.RelayLimits{}); err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 64<<10)
	for i := range payloads {
		payload[0], payload[1] = byte(i), byte(i>>8)
		if err := s.AppendRelay("sbx_rl_1", kv.ToEnrollee, payload, kv.RelayLimits{MailboxCapacity: 1 << 20}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()

	cmd := exec.Command(bin, "compact", "--data", dir)
	cmd.Env = serveEnv()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if _, err := os.Stat(path + ".compact"); err == nil {
			break
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	_, err = os.Stat(path + ".compact")
	t.Logf("killed before the rename: %v", err == nil)

	s, err = kvtest.Open(path, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if problems, err := s.CheckIntegrity(); err != nil || len(problems) > 0 {
		t.Fatalf("the store's page check after the kill: %v, %v", problems, err)
	}
	got, err := s.DrainRelay("sbx_rl_1", kv.ToEnrollee)
	s.Close()
	if err != nil || len(got) != payloads {
		t.Fatalf("after the kill the store holds %d payloads (%v), want %d", len(got), err, payloads)
	}
	if _, err := bolt.CompactFile(path, time.Second); err != nil {
		t.Fatalf("the next compaction: %v", err)
	}
	if _, err := os.Stat(path + ".compact"); !os.IsNotExist(err) {
		t.Fatalf("the stale copy is still there: %v", err)
	}
}

// TestCompactKeepsTheStoresOwnerAndMode: compact run as root (the README's
// stop, compact, start) gives the compacted store the owner and mode of the
// file it replaces, so the service's user can open it again.
func TestCompactKeepsTheStoresOwnerAndMode(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root can give a file to another user")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, dbFile)
	s, err := kvtest.Open(path, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	const uid, gid, mode = 4242, 4343, 0o640
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, "", "compact", "--data", dir)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid || st.Gid != gid || fi.Mode().Perm() != mode {
		t.Fatalf("the compacted store is %d:%d mode %04o, want %d:%d mode %04o", st.Uid, st.Gid, fi.Mode().Perm(), uid, gid, mode)
	}
}

// TestCompactAndServeExcludeEachOther: compact and serve hold the data
// directory's lock. A compact while a serve holds it (starting, its socket
// not yet answering) is refused and leaves the store alone; a serve started
// while compact writes the compacted copy is refused, instead of opening
// the file that becomes sealbox.db.old (whose accounts an operator's rm
// would lose).
func TestCompactAndServeExcludeEachOther(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, dbFile)
	s, err := kvtest.Open(path, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour)
	if err := s.IssueEnrollmentCode("acct-1", "sbx_en_1", "222222222222", exp); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RedeemEnrollmentCode("sbx_en_1", false, func([]byte) string { return "sbx_rl_1" }, exp, kv.RelayLimits{}); err != nil {
		t.Fatal(err)
	}
	// Enough for the compaction to take a while: 24 MiB of payloads.
	payload := make([]byte, 64<<10)
	for i := range 384 {
		payload[0], payload[1] = byte(i), byte(i>>8)
		if err := s.AppendRelay("sbx_rl_1", kv.ToEnrollee, payload, kv.RelayLimits{MailboxCapacity: 1 << 20}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()

	unlock, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = runCLI(t, "", "compact", "--data", dir)
	unlock()
	if err == nil || !strings.Contains(err.Error(), "a sealbox serve or compact is running on "+dir) || !strings.Contains(err.Error(), "stop it, then compact") {
		t.Fatalf("compact while a serve holds the data directory: %v", err)
	}
	if _, err := os.Stat(path + ".old"); !os.IsNotExist(err) {
		t.Fatalf("the refused compact kept an old store: %v", err)
	}

	done := make(chan error, 1)
	go func() {
		_, _, err := runCLI(t, "", "compact", "--data", dir)
		done <- err
	}()
	for {
		if _, err := os.Stat(path + ".compact"); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("compact ended (%v) before the test saw its copy", err)
		case <-time.After(time.Millisecond):
		}
	}
	err = serveFails(t, Location{Data: dir})
	if err == nil || !strings.Contains(err.Error(), "sealbox compact does") {
		t.Fatalf("serve while compact runs: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("compact: %v", err)
	}
}
