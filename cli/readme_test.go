package cli

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// The README's examples are a client many people copy, so they run as a
// test, and so do those of the client developer's walkthrough
// (server/WALKTHROUGH.md), which continue from them. Every ```sh block of
// the README and then of the walkthrough runs, in order, in one bash with -euo pipefail, in
// an empty directory, with the built binary first on PATH and a server
// started the way the Quick start starts it. Nothing is rewritten but the
// addresses: 127.0.0.1:8080 becomes this test's server and 127.0.0.1:8081 a
// second free port. A curl command answers what the comment right after it
// shows ("# 204 …"), or a 2xx when none is shown; any other command must
// exit 0. The Quick start's ```bash blocks are a newcomer's install steps:
// TestREADMEInstall runs them in a fresh shell (readme_install_test.go).
// Blocks fenced otherwise (```console, ```cron, ```nginx, …) are shown, not
// run: they start long-running servers or touch the system.

// readmeBlock is one fenced block: its file, its lines and the line of the
// first.
type readmeBlock struct {
	file  string
	line  int
	lines []string
}

// examplePaths are the documents whose examples run, in the order they
// run: the walkthrough uses the server and variables the README's set up.
var examplePaths = []string{"../README.md", "../server/WALKTHROUGH.md"}

// exampleBlocks returns the ```lang blocks of every document that holds
// examples, in the order they run.
func exampleBlocks(lang string) ([]readmeBlock, error) {
	var all []readmeBlock
	for _, path := range examplePaths {
		blocks, err := readmeBlocks(path, lang)
		if err != nil {
			return nil, err
		}
		all = append(all, blocks...)
	}
	return all, nil
}

// readmeBlocks returns the README's blocks fenced ```lang, in order.
func readmeBlocks(path, lang string) ([]readmeBlock, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var blocks []readmeBlock
	var cur *readmeBlock
	fence := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case fence == "" && strings.HasPrefix(trimmed, "```"):
			fence = trimmed
			if trimmed == "```"+lang {
				blocks = append(blocks, readmeBlock{file: strings.TrimPrefix(path, "../"), line: n + 1})
				cur = &blocks[len(blocks)-1]
			}
		case fence != "" && trimmed == "```":
			fence, cur = "", nil
		case cur != nil:
			// Blocks inside list items are indented; the indent is not bash's.
			cur.lines = append(cur.lines, strings.TrimPrefix(line, "   "))
		}
	}
	return blocks, sc.Err()
}

// statusComment is a comment giving the status of the command before it.
var statusComment = regexp.MustCompile(`^#\s*([1-5][0-9][0-9])\b`)

// readmeScript turns the blocks into one bash script. Before each command it
// records the command's file and line and expected status for the curl
// wrapper and the ERR trap.
func readmeScript(blocks []readmeBlock) string {
	var b strings.Builder
	b.WriteString(readmePrelude)
	for _, blk := range blocks {
		lines := blk.lines
		for i := 0; i < len(lines); i++ {
			line := lines[i]
			trimmed := strings.TrimSpace(line)
			if trimmed == "" || strings.HasPrefix(trimmed, "#") {
				b.WriteString(line + "\n")
				continue
			}
			// A command runs to the first line that does not end in a
			// backslash; the comment right after it may give its status.
			end := i
			for end < len(lines)-1 && strings.HasSuffix(strings.TrimRight(lines[end], " "), `\`) {
				end++
			}
			expect := ""
			if end+1 < len(lines) {
				if m := statusComment.FindStringSubmatch(strings.TrimSpace(lines[end+1])); m != nil {
					expect = m[1]
				}
			}
			fmt.Fprintf(&b, "__readme_next %s:%d '%s'\n", blk.file, blk.line+i, expect)
			for _, l := range lines[i : end+1] {
				b.WriteString(l + "\n")
			}
			i = end
		}
	}
	b.WriteString("echo __README_DONE__\n")
	return b.String()
}

// readmePrelude wraps curl so every answer's status is checked against the
// document, and reports the file and line of any command that fails.
const readmePrelude = `set -euo pipefail
__readme_line=README.md:0
__readme_expect=
__readme_next() { __readme_line=$1; __readme_expect=$2; }
trap 'echo "$__readme_line: the command failed (exit $?)" >&2' ERR
curl() {
	local out rc=0 status
	out=$(mktemp)
	command curl --write-out '%{stderr}__README_STATUS %{http_code}\n' "$@" 2>"$out" || rc=$?
	grep -v '^__README_STATUS ' "$out" >&2 || true
	local statuses
	statuses=$(sed -n 's/^__README_STATUS //p' "$out")
	rm -f "$out"
	if [ "$rc" -ne 0 ]; then
		echo "$__readme_line: curl exited $rc" >&2
		return "$rc"
	fi
	for status in $statuses; do
		if [ -n "$__readme_expect" ]; then
			if [ "$status" != "$__readme_expect" ]; then
				echo "$__readme_line: the answer is $status, the example says $__readme_expect" >&2
				return 1
			fi
		else
			case "$status" in
			2??) ;;
			*)
				echo "$__readme_line: the answer is $status; the example shows no status, so it must be 2xx" >&2
				return 1
				;;
			esac
		fi
	done
}
`

// TestREADME runs the README's examples against the real binary.
func TestREADME(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs the README's examples")
	}
	for _, tool := range []string{"bash", "curl", "jq", "sha256sum", "base64", "cmp"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is needed to run the README (Debian: apt-get install %s)", tool, tool)
			}
			t.Skipf("%s is needed to run the README's examples", tool)
		}
	}
	blocks, err := exampleBlocks("sh")
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) < 10 {
		t.Fatalf("the README and the walkthrough have %d ```sh blocks; the test would prove little", len(blocks))
	}
	script := readmeScript(blocks)
	if !strings.Contains(script, "127.0.0.1:8080") {
		t.Fatal("the README's examples never name the server's address 127.0.0.1:8080")
	}

	bin := buildBinary(t)
	work := t.TempDir()
	addr, spare := freeAddr(t), freeAddr(t)
	script = strings.NewReplacer("127.0.0.1:8080", addr, "127.0.0.1:8081", spare).Replace(script)
	if err := os.WriteFile(filepath.Join(work, "readme.sh"), []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}

	// The server the Quick start starts: `sealbox serve` with its defaults,
	// in the directory the examples run in.
	srv := exec.Command(bin, "serve", "--listen", addr)
	srv.Dir = work
	srv.Env = serveEnv()
	log := &syncBuffer{ready: make(chan string, 1)}
	srv.Stderr = log
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	t.Cleanup(func() {
		srv.Process.Signal(syscall.SIGTERM)
		<-exited
	})
	select {
	case <-log.ready:
	case err := <-exited:
		t.Fatalf("serve exited at start: %v\n%s", err, log.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not start:\n%s", log.String())
	}

	run := exec.Command("bash", "readme.sh")
	run.Dir = work
	run.Env = append(serveEnv(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	// Its own process group, so a server the README starts in the
	// background goes when the test ends, whatever happened.
	run.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := run.CombinedOutput()
	if run.Process != nil {
		syscall.Kill(-run.Process.Pid, syscall.SIGKILL)
	}
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "__README_DONE__") {
		t.Fatalf("the README's examples failed (%v):\n%s\n--- server log:\n%s", err, tail(string(out), 60), tail(log.String(), 20))
	}
	t.Logf("what the examples printed:\n%s", out)
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestREADMENamesEveryVariable: the README's configuration table names the
// environment variable of every serve flag.
func TestREADMENamesEveryVariable(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	newServeCmd().Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" || f.Deprecated != "" {
			return
		}
		if !strings.Contains(string(readme), "`"+envName(f.Name)+"`") {
			t.Errorf("the README does not name %s (--%s)", envName(f.Name), f.Name)
		}
	})
}

// readmeOutputs are the patterns of what the README's commands write in the
// directory they run in, each with the paths it writes there: redirections
// and -o (the files sent and fetched), "$PWD/NAME" (data directories and
// backups, which hold server.key, and the audit's state), keys made by
// keygen (ssh-keygen's with its .pub), and the release build's directory.
var readmeOutputs = []struct {
	re    *regexp.Regexp
	paths []string
}{
	{regexp.MustCompile(`[0-9]?>\s*([A-Za-z][\w.-]*)`), []string{""}},
	{regexp.MustCompile(`\s-o\s+([A-Za-z][\w.-]*)`), []string{""}},
	{regexp.MustCompile(`"\$PWD/([\w.-]+)"`), []string{"", "/server.key"}},
	{regexp.MustCompile(`dev keygen\s+([\w.-]+)`), []string{""}},
	{regexp.MustCompile(`ssh-keygen\s.*-f\s+([\w.-]+)`), []string{"", ".pub"}},
	{regexp.MustCompile(`\.ci/release\s+([\w.-]+)`), []string{"/sealbox-linux-amd64", "/SHA256SUMS"}},
}

// TestREADMEOutputsAreIgnored: every file the README's examples and
// .ci/release write when run in the checkout (private keys, backups that
// hold server.key, data directories, release binaries) is one git ignores,
// so none is committed by accident.
func TestREADMEOutputsAreIgnored(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is needed to ask what the checkout ignores")
	}
	var paths []string
	for _, lang := range []string{"sh", "bash", "console"} {
		blocks, err := exampleBlocks(lang)
		if err != nil {
			t.Fatal(err)
		}
		for _, blk := range blocks {
			for _, line := range blk.lines {
				for _, o := range readmeOutputs {
					for _, m := range o.re.FindAllStringSubmatch(line, -1) {
						for _, suffix := range o.paths {
							if p := m[1] + suffix; !slices.Contains(paths, p) {
								paths = append(paths, p)
							}
						}
					}
				}
			}
		}
	}
	for _, want := range []string{"alice.key", "sealbox-backup/server.key", "dist/SHA256SUMS", "audit-state", "witness.key.pub"} {
		if !slices.Contains(paths, want) {
			t.Fatalf("the README's outputs found lack %s: the patterns no longer read the README (%v)", want, paths)
		}
	}
	cmd := exec.Command(git, append([]string{"check-ignore", "--no-index", "--verbose", "--non-matching", "--"}, paths...)...)
	cmd.Dir = ".."
	out, err := cmd.Output()
	if len(out) == 0 {
		t.Fatalf("git check-ignore: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		// A path no pattern ignores is "::\t<path>".
		if rest, ok := strings.CutPrefix(line, "::\t"); ok {
			t.Errorf("the README's examples write %s in the checkout, and .gitignore does not cover it", rest)
		}
	}
}

// sectionCitation is a reference to a README section by its name in
// quotes, after "see" or "the README's" (the quotes escaped in Go strings
// too).
var sectionCitation = regexp.MustCompile(`(?:[Ss]ee (?:the README's )?|README's )\\?"([^"\\]+)\\?"`)

// TestREADMESectionCitations: every section the README, the walkthrough,
// the changelog and the code's messages and help cite by name is a heading
// of the README or of the walkthrough (backticks aside), so a reader sent
// there finds it.
func TestREADMESectionCitations(t *testing.T) {
	headings := map[string]bool{}
	for _, path := range examplePaths {
		doc, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(doc), "\n") {
			if title, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " "); ok && strings.HasPrefix(line, "#") {
				headings[strings.ReplaceAll(strings.TrimSpace(title), "`", "")] = true
			}
		}
	}
	cited := 0
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !(strings.HasSuffix(path, ".go") || strings.HasSuffix(path, ".md")) {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(raw), "\n") {
			for _, m := range sectionCitation.FindAllStringSubmatch(line, -1) {
				cited++
				if name := strings.ReplaceAll(m[1], "`", ""); !headings[name] {
					t.Errorf("%s:%d cites the README's section %q, which it does not have", path, i+1, name)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cited < 10 {
		t.Fatalf("found %d citations: the pattern no longer reads them", cited)
	}
}

// TestREADMENamesEveryPackage: the README's Development section names every
// package of the module (the module's root by its main.go), so a new package
// comes with its line on the contributors' map.
func TestREADMENamesEveryPackage(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Development\n")
	if !ok {
		t.Fatal("the README has no Development section")
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	cmd := exec.Command("go", "list", "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	packages := strings.Fields(string(out))
	if len(packages) < 20 {
		t.Fatalf("go list named %d packages: %v", len(packages), packages)
	}
	for _, pkg := range packages {
		name := "main.go"
		if rel, ok := strings.CutPrefix(pkg, "sealbox/"); ok {
			name = rel
		}
		if !strings.Contains(section, "`"+name+"`") {
			t.Errorf("the README's Development section does not name the package %s (as `%s`)", pkg, name)
		}
	}
}
